"""
`CuArray`s as libddp device tensors: pointer, device and element type, so that every
DDP collective takes them as it takes `Array`s. This libddp version answers device
buffers with `DDP_ERR_UNSUPPORTED` (a `DDPError`); the same calls reduce on the GPU
once libddp's NCCL backend lands.
"""
module DDPCUDAExt

using CUDA: CUDA, CuArray
using DDP: DDP, LibDDP

"""
    DDP.tensor(x::CuArray)

The device `ddp_tensor` of `x`. ddp.h has no stream argument, so the task's stream is
synchronized first: kernels still writing `x` (the backward pass) finish before
libddp reads it.
"""
function DDP.tensor(x::CuArray{T}) where {T}
    CUDA.synchronize(CUDA.stream())
    return LibDDP.ddp_tensor(reinterpret(Ptr{Cvoid}, pointer(x)), length(x), Int32(DDP.dtype_of(T)),
                             Int32(LibDDP.DDP_DEVICE_CUDA),
                             Int32(CUDA.deviceid(CUDA.device(x))), UInt32(0))
end

end # module
