//! Rust element types and the libddp dtype each one is.
use ddp_sys::ddp_dtype;

mod sealed {
    pub trait Sealed {}
}

/// A type libddp can reduce: `f32`, `f64`, `i8`, `i32`, `i64`, `u8`,
/// [`half::f16`] and [`half::bf16`]. Sealed, so the dtype passed to libddp
/// always matches the memory: a wrong dtype does not compile.
///
/// Use `half` 1.x for `f16` and `bf16`: the crate this one re-exports as
/// [`crate::half`] (a crate that depends on `half = "1"` gets the same one).
/// `half` 2's types are other types and do not compile here.
///
/// ```
/// let comm = ddp::Comm::init()?;
/// let mut scale = vec![ddp::half::f16::from_f32(0.5)];
/// comm.allreduce(&mut [&mut scale], ddp::Op::Max)?;
/// # Ok::<(), ddp::Error>(())
/// ```
///
/// ```compile_fail
/// // u16 has no libddp dtype.
/// let comm = ddp::Comm::init().unwrap();
/// comm.allreduce(&mut [vec![1u16]], ddp::Op::Sum).unwrap();
/// ```
pub trait Element: sealed::Sealed + Copy + Send + 'static {
    /// The `ddp_dtype` value of this type.
    #[doc(hidden)]
    const DTYPE: ddp_dtype::Type;
}

macro_rules! element {
    ($($t:ty => $dtype:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: ddp_dtype::Type = ddp_dtype::$dtype;
        }
    )*};
}

element! {
    f32 => DDP_DTYPE_F32,
    f64 => DDP_DTYPE_F64,
    i8 => DDP_DTYPE_I8,
    i32 => DDP_DTYPE_I32,
    i64 => DDP_DTYPE_I64,
    u8 => DDP_DTYPE_U8,
    half::f16 => DDP_DTYPE_F16,
    half::bf16 => DDP_DTYPE_BF16,
}
