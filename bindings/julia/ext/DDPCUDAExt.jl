"""
`CuArray`s as libddp device tensors: pointer, device and element type, so that every
DDP collective takes them as it takes `Array`s: with `DDP_BACKEND=nccl` NCCL reduces
them on the GPU, with `mpi` libddp stages them through pinned host memory. And the
rank's GPU: `DDP.Init()` makes libddp's choice (`DDP.device()`) CUDA.jl's device.
"""
module DDPCUDAExt

using CUDA: CUDA, CuArray
using DDP: DDP, LibDDP

"""
    select_device(comm)

`CUDA.device!(DDP.device(comm))` when libddp assigned this rank a GPU, so that
CUDA.jl allocates on the device libddp's device tensors must live on.
"""
function select_device(comm)
    id = DDP.device(comm)
    id >= 0 && CUDA.device!(id)
    return nothing
end

function __init__()
    push!(DDP.INIT_HOOKS, select_device)
    DDP.Initialized() && select_device(DDP.world())  # CUDA.jl loaded after DDP.Init()
end

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
