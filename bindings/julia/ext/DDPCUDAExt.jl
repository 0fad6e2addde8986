"""
`CuArray`s as libddp device tensors: pointer, device and element type, so that every
DDP collective takes them as it takes `Array`s: with `DDP_BACKEND=nccl` NCCL reduces
them on the GPU, with `mpi` libddp stages them through pinned host memory.
"""
module DDPCUDAExt

using CUDA: CUDA, CuArray
using DDP: DDP, LibDDP

"""
    DDP.tensor(x::CuArray)

The device `ddp_tensor` of `x`. libddp orders device calls on the stream of its
options, by default CUDA's legacy default stream, which CUDA.jl's task streams do not
wait for; so the task's stream is synchronized first: kernels still writing `x` (the
backward pass) finish before libddp reads it.
"""
function DDP.tensor(x::CuArray{T}) where {T}
    CUDA.synchronize(CUDA.stream())
    return LibDDP.ddp_tensor(reinterpret(Ptr{Cvoid}, pointer(x)), length(x), Int32(DDP.dtype_of(T)),
                             Int32(LibDDP.DDP_DEVICE_CUDA),
                             Int32(CUDA.deviceid(CUDA.device(x))), UInt32(0))
end

end # module
