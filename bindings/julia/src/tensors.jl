# Julia arrays as ddp_tensors, and Julia's reduction functions as ddp_ops.

"""The ddp_dtype of each element type libddp reduces (`Core.BFloat16` from Julia 1.11)."""
const DTYPES = Dict{DataType, LibDDP.ddp_dtype}(
    Int8 => LibDDP.DDP_DTYPE_I8, Int32 => LibDDP.DDP_DTYPE_I32,
    Int64 => LibDDP.DDP_DTYPE_I64, UInt8 => LibDDP.DDP_DTYPE_U8,
    Float16 => LibDDP.DDP_DTYPE_F16, Float32 => LibDDP.DDP_DTYPE_F32,
    Float64 => LibDDP.DDP_DTYPE_F64, BFloat16 => LibDDP.DDP_DTYPE_BF16)

isdefined(Core, :BFloat16) && (DTYPES[getfield(Core, :BFloat16)] = LibDDP.DDP_DTYPE_BF16)

"""
    dtype_of(T)

The `ddp_dtype` of element type `T`; an `ArgumentError` naming `T` for any other.
"""
function dtype_of(::Type{T}) where {T}
    haskey(DTYPES, T) && return DTYPES[T]
    throw(ArgumentError("element type $T has no libddp dtype; use one of " *
                        join(sort!(string.(collect(keys(DTYPES)))), ", ")))
end

"""
    is_contiguous(x)

Whether array `x` lies in one block of memory in column-major order, so that libddp
can reduce it in place as `length(x)` elements.
"""
function is_contiguous(x::AbstractArray)
    x isa DenseArray && return true
    x isa StridedArray || return false
    expected = 1
    for (extent, stride) in zip(size(x), strides(x))
        extent == 1 || stride == expected || return false
        expected *= extent
    end
    return true
end

"""
    tensor(x)

The `LibDDP.ddp_tensor` describing array `x` in place (no copy). The caller keeps `x`
alive while libddp uses it. Host arrays here; `CuArray`s through the CUDA extension.
A non-contiguous array is an `ArgumentError`, never a silent copy.
"""
function tensor(x::AbstractArray{T}) where {T}
    is_contiguous(x) || throw(ArgumentError(
        "a $(typeof(x)) is not contiguous in memory and cannot be reduced in place; " *
        "pass an Array or a contiguous view (copy it with `collect` first)"))
    data = pointer(x)
    data isa Ptr || throw(ArgumentError(
        "a $(typeof(x)) is not host memory; load the extension for its device (CUDA.jl)"))
    return LibDDP.ddp_tensor(Ptr{Cvoid}(data), length(x), Int32(dtype_of(T)),
                             Int32(LibDDP.DDP_DEVICE_CPU), Int32(0), UInt32(0))
end

"""
    array_list(v)

The arrays one collective call works on: `v` itself when it is an array of numbers,
else the arrays of a `Tuple`, `NamedTuple` or `Vector` of them (reduced in one call, fused).
"""
array_list(v::AbstractArray{<:Number}) = (v,)
array_list(v::Union{Tuple, AbstractVector{<:AbstractArray}}) = v
array_list(v::NamedTuple) = values(v)

"""
    list_names(v, arrays)

The `LeafNames` of the `arrays` of `array_list(v)` while a timeline records (field
names, 1-based indices); `nothing` for a single array, which needs no name.
"""
list_names(::AbstractArray{<:Number}, arrays) = nothing
list_names(v, arrays) = leaf_names(v, arrays)

"""
    op_code(op)

The `ddp_op` for a reduction: `+`, `*`, `min`, `max` (as FluxMPI takes them), or
`:sum`, `:prod`, `:min`, `:max`, `:avg` by name; an `ArgumentError` for anything else.
"""
op_code(::typeof(+)) = LibDDP.DDP_OP_SUM
op_code(::typeof(*)) = LibDDP.DDP_OP_PROD
op_code(::typeof(min)) = LibDDP.DDP_OP_MIN
op_code(::typeof(max)) = LibDDP.DDP_OP_MAX

const OPS_BY_NAME = Dict(:sum => LibDDP.DDP_OP_SUM, :prod => LibDDP.DDP_OP_PROD,
                         :min => LibDDP.DDP_OP_MIN, :max => LibDDP.DDP_OP_MAX,
                         :avg => LibDDP.DDP_OP_AVG)

function op_code(op::Symbol)
    haskey(OPS_BY_NAME, op) && return OPS_BY_NAME[op]
    throw(ArgumentError("op :$op: use +, *, min, max or :sum, :prod, :min, :max, :avg"))
end

op_code(op) = throw(ArgumentError(
    "op $op: use +, *, min, max or :sum, :prod, :min, :max, :avg"))

"""
    seconds_error(name, value, meanings)

Why argument `name`'s `value` is not a number of seconds libddp can be given, naming
what its values mean (`meanings`), or `nothing` when it is one: a `Real` other than a
`Bool` (as Python's binding: `true` is no number of seconds), or `nothing` (0, libddp's
default). Only the type is checked here: the value is libddp's to check, as for a C
caller, with libddp's message (a timeout: a finite number ≥ 0, 0 meaning the default);
a collective refuses a bad one telling its peers first, so that they fail at once.
"""
function seconds_error(name, value, meanings)
    value === nothing && return nothing
    value isa Real && !(value isa Bool) && return nothing
    return "$name $(repr(value)): expected a number of seconds ($meanings)"
end

"""Why `timeout_s` is not a timeout (`seconds_error`); 0 or `nothing` means `default`."""
timeout_error(timeout_s, default = "the communicator's timeout") =
    seconds_error("timeout_s", timeout_s, "nothing or 0: $default")

"""`value` (checked by `seconds_error`) as the C double libddp takes: `nothing` is 0."""
seconds(value) = value === nothing ? 0.0 : Float64(value)

"""
    fusion_bytes_error(fusion_bytes)

Why `fusion_bytes` is not a bucket size libddp can be given (an integer that fits its
`int64_t`, not a `Bool`), or `nothing` when it is one or `nothing`. Its value is
libddp's to check, as for a C caller (-1: no fusion; 0: libddp's default).
"""
function fusion_bytes_error(fusion_bytes)
    fusion_bytes === nothing && return nothing
    fusion_bytes isa Integer && !(fusion_bytes isa Bool) &&
        typemin(Int64) <= fusion_bytes <= typemax(Int64) && return nothing
    return "fusion_bytes $(repr(fusion_bytes)): expected an integer number of bytes that fits " *
           "in 64 bits (-1: no fusion; nothing or 0: libddp's default)"
end

"""
    collective_options(fusion_bytes, timeout_s, names = nothing)

`C_NULL` (libddp's defaults) when all are `nothing`, else a filled
`Ref{ddp_collective_options}` (fusion bucket bytes, -1 for no fusion; seconds, 0 for
the communicator's; the tensors' `LeafNames`, which the caller keeps alive with
`GC.@preserve` for the call). An `ArgumentError` where `fusion_bytes` or `timeout_s`
is of a kind libddp cannot be given (`fusion_bytes_error`, `timeout_error`); their
values are libddp's to check. Device calls run on libddp's default stream (CUDA's
legacy default stream); the CUDA extension synchronizes the task's stream before
handing libddp a `CuArray`.
"""
function collective_options(fusion_bytes, timeout_s, names::Union{Nothing, LeafNames} = nothing)
    for reason in (fusion_bytes_error(fusion_bytes), timeout_error(timeout_s))
        reason === nothing || throw(ArgumentError(reason))
    end
    fusion_bytes === nothing && timeout_s === nothing && names === nothing && return C_NULL
    opts = Ref{LibDDP.ddp_collective_options}()
    check(LibDDP.ddp_collective_options_init(opts, sizeof(LibDDP.ddp_collective_options)))
    defaults = opts[]
    opts[] = LibDDP.ddp_collective_options(
        defaults.struct_size,
        fusion_bytes === nothing ? defaults.fusion_bytes : Int64(fusion_bytes),
        timeout_s === nothing ? defaults.timeout_s : seconds(timeout_s),
        defaults.cuda_stream,
        names === nothing ? defaults.names : pointer(names.pointers),
        defaults.for_binding)
    return opts
end
