# bfloat16 (libddp's DDP_DTYPE_BF16) as a Julia element type, with no dependency.

"""
    DDP.BFloat16(x)

The bfloat16 element type (the upper 16 bits of a `Float32`), which libddp reduces as
`DDP_DTYPE_BF16`: pairwise in single precision, rounding to nearest even after each
step. Defined here because Julia 1.10's Base has none; conversions round to nearest
even. On Julia 1.11 and later, arrays of `Core.BFloat16` (the type BFloat16s.jl uses
there) are accepted as well; on 1.10, hand libddp a BFloat16s.jl array as
`reinterpret(DDP.BFloat16, x)` (same bits, still in place).
"""
primitive type BFloat16 <: AbstractFloat 16 end

function BFloat16(x::Float32)
    bits = reinterpret(UInt32, x)
    isnan(x) && return reinterpret(BFloat16, UInt16(bits >> 16) | 0x0040)  # stays a NaN
    rounding = 0x00007fff + ((bits >> 16) & 0x00000001)                   # nearest, ties to even
    return reinterpret(BFloat16, UInt16((bits + rounding) >> 16))
end

BFloat16(x::Real) = BFloat16(Float32(x))

Base.Float32(x::BFloat16) = reinterpret(Float32, UInt32(reinterpret(UInt16, x)) << 16)
Base.Float64(x::BFloat16) = Float64(Float32(x))
Base.promote_rule(::Type{BFloat16}, ::Type{T}) where {T <: Union{Float32, Float64}} = T
Base.:(==)(a::BFloat16, b::BFloat16) = Float32(a) == Float32(b)
Base.isless(a::BFloat16, b::BFloat16) = isless(Float32(a), Float32(b))
Base.isnan(x::BFloat16) = isnan(Float32(x))
Base.show(io::IO, x::BFloat16) = print(io, "BFloat16(", Float32(x), ")")

for op in (:+, :-, :*, :/)
    @eval Base.$op(a::BFloat16, b::BFloat16) = BFloat16($op(Float32(a), Float32(b)))
end
