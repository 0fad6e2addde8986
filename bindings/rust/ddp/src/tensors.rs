//! What a collective accepts as a list of tensors: slices, vectors and lists
//! of them of one element type, device memory ([`DeviceSlice`]), or a
//! [`TensorList`] of mixed types.
use std::marker::PhantomData;

use ddp_sys::{ddp_device_type, ddp_tensor};

use crate::Element;

mod sealed {
    pub trait SealedBuffer {}
    pub trait SealedTensors {}
    pub trait SealedBorrowed {}
    pub trait SealedView {}
    pub trait SealedViews {}
}

fn describe<T: Element>(data: *const T, len: usize) -> ddp_tensor {
    ddp_tensor {
        data: data as *mut std::ffi::c_void,
        count: len as i64,
        dtype: T::DTYPE as i32,
        device_type: ddp_device_type::DDP_DEVICE_CPU as i32,
        device_id: 0,
        flags: 0,
    }
}

/// `len` elements of `T` in the memory of a CUDA device (from CUDA, cudarc,
/// a framework's tensor), for the `nccl` backend, which reduces them on the
/// GPU (the `mpi` backend stages them through the host). It is a borrow:
/// the memory stays the caller's, and libddp writes it only during a call
/// (or an async request's scope).
///
/// On a rank without a usable GPU, every call with a device slice fails
/// with [`crate::ErrorKind::Unsupported`] saying why, and its peers fail too.
///
/// ```
/// let comm = ddp::Comm::init()?;
/// let mut fake = [0.0f32; 4];   // stands for device memory; no GPU here
/// let grads = unsafe { ddp::DeviceSlice::from_raw_parts(fake.as_mut_ptr(), 4, 0) };
/// if comm.device().is_none() {
///     let err = comm.allreduce(&mut [grads], ddp::Op::Avg).unwrap_err();
///     assert_eq!(err.kind(), ddp::ErrorKind::Unsupported);
/// }
/// # Ok::<(), ddp::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceSlice<'a, T: Element> {
    data: *mut T,
    len: usize,
    device: i32,
    borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T: Element> DeviceSlice<'a, T> {
    /// The device memory at `data`: `len` elements of `T` on CUDA device
    /// `device` (the communicator's, [`crate::Comm::device`]).
    ///
    /// # Safety
    /// `data` points to `len` elements of `T` allocated on device `device`
    /// (or is any pointer when `len` is 0), valid for `'a`, and nothing else
    /// reads or writes them during a call that uses this slice.
    pub unsafe fn from_raw_parts(data: *mut T, len: usize, device: i32) -> Self {
        DeviceSlice { data, len, device, borrow: PhantomData }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The CUDA device.
    pub fn device(&self) -> i32 {
        self.device
    }

    fn tensor(&self) -> ddp_tensor {
        ddp_tensor {
            device_type: ddp_device_type::DDP_DEVICE_CUDA as i32,
            device_id: self.device,
            ..describe(self.data, self.len)
        }
    }
}

impl<T: Element> sealed::SealedBuffer for DeviceSlice<'_, T> {}
impl<T: Element> Buffer for DeviceSlice<'_, T> {
    fn tensor_mut(&mut self) -> ddp_tensor {
        self.tensor()
    }
}

impl<T: Element> sealed::SealedBuffer for &mut DeviceSlice<'_, T> {}
impl<T: Element> Buffer for &mut DeviceSlice<'_, T> {
    fn tensor_mut(&mut self) -> ddp_tensor {
        self.tensor()
    }
}

/// One contiguous host buffer of an [`Element`] type: `&mut [T]`,
/// `&mut Vec<T>` or `Vec<T>`. Sealed: libddp must get the true pointer and length.
pub trait Buffer: sealed::SealedBuffer {
    #[doc(hidden)]
    fn tensor_mut(&mut self) -> ddp_tensor;
}

impl<T: Element> sealed::SealedBuffer for &mut [T] {}
impl<T: Element> Buffer for &mut [T] {
    fn tensor_mut(&mut self) -> ddp_tensor {
        describe(self.as_mut_ptr(), self.len())
    }
}

impl<T: Element> sealed::SealedBuffer for &mut Vec<T> {}
impl<T: Element> Buffer for &mut Vec<T> {
    fn tensor_mut(&mut self) -> ddp_tensor {
        describe(self.as_mut_ptr(), self.len())
    }
}

impl<T: Element> sealed::SealedBuffer for Vec<T> {}
impl<T: Element> Buffer for Vec<T> {
    fn tensor_mut(&mut self) -> ddp_tensor {
        describe(self.as_mut_ptr(), self.len())
    }
}

/// A list of tensors a collective works on, in order: an array, slice or
/// `Vec` of [`Buffer`]s, or a [`TensorList`].
///
/// ```
/// let comm = ddp::Comm::init()?;
/// let mut weights = vec![1.0f32; 4];
/// let mut bias = vec![0.5f32];
/// comm.allreduce(&mut [&mut weights, &mut bias], ddp::Op::Sum)?;   // an array of &mut Vec
/// comm.allreduce(&mut [&mut weights[..2]], ddp::Op::Max)?;         // part of a buffer
/// # Ok::<(), ddp::Error>(())
/// ```
pub trait Tensors: sealed::SealedTensors {
    #[doc(hidden)]
    fn tensors_mut(&mut self) -> Vec<ddp_tensor>;
}

impl<B: Buffer> sealed::SealedTensors for [B] {}
impl<B: Buffer> Tensors for [B] {
    fn tensors_mut(&mut self) -> Vec<ddp_tensor> {
        self.iter_mut().map(Buffer::tensor_mut).collect()
    }
}

impl<B: Buffer, const N: usize> sealed::SealedTensors for [B; N] {}
impl<B: Buffer, const N: usize> Tensors for [B; N] {
    fn tensors_mut(&mut self) -> Vec<ddp_tensor> {
        self.as_mut_slice().tensors_mut()
    }
}

impl<B: Buffer> sealed::SealedTensors for Vec<B> {}
impl<B: Buffer> Tensors for Vec<B> {
    fn tensors_mut(&mut self) -> Vec<ddp_tensor> {
        self.as_mut_slice().tensors_mut()
    }
}

/// A list of buffers of mixed element types, borrowed mutably for `'a`.
///
/// ```
/// let comm = ddp::Comm::init()?;
/// let mut weights = vec![1.0f32; 3];
/// let mut steps = vec![10i64];
/// let mut scale = vec![half::bf16::from_f32(0.5)];
/// let mut list = ddp::TensorList::new();
/// list.push(&mut weights).push(&mut steps).push(&mut scale);
/// assert_eq!(list.len(), 3);
/// comm.allreduce(&mut list, ddp::Op::Sum)?;
/// # Ok::<(), ddp::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct TensorList<'a> {
    tensors: Vec<ddp_tensor>,
    borrows: PhantomData<&'a mut [u8]>,
}

impl<'a> TensorList<'a> {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a buffer, borrowing it for the list's lifetime.
    pub fn push<T: Element>(&mut self, buffer: &'a mut [T]) -> &mut Self {
        self.tensors.push(describe(buffer.as_mut_ptr(), buffer.len()));
        self
    }

    /// Appends device memory.
    pub fn push_device<T: Element>(&mut self, buffer: DeviceSlice<'a, T>) -> &mut Self {
        self.tensors.push(buffer.tensor());
        self
    }

    /// The number of tensors.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether the list has no tensors.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

impl sealed::SealedTensors for TensorList<'_> {}
impl Tensors for TensorList<'_> {
    fn tensors_mut(&mut self) -> Vec<ddp_tensor> {
        self.tensors.clone()
    }
}

/// A [`Tensors`] list that only borrows its buffers (an array or `Vec` of
/// `&mut [T]` / `&mut Vec<T>`, or a [`TensorList`]): the list may be dropped
/// while an async request writes into the buffers, as libddp copied the
/// descriptors and the borrows keep the buffers alive.
pub trait BorrowedTensors: Tensors + sealed::SealedBorrowed {}

/// A [`Buffer`] that is a borrow, not an owned `Vec`.
pub trait BorrowedBuffer: Buffer + sealed::SealedBorrowed {}
impl<T: Element> sealed::SealedBorrowed for &mut [T] {}
impl<T: Element> BorrowedBuffer for &mut [T] {}
impl<T: Element> sealed::SealedBorrowed for &mut Vec<T> {}
impl<T: Element> BorrowedBuffer for &mut Vec<T> {}
impl<T: Element> sealed::SealedBorrowed for DeviceSlice<'_, T> {}
impl<T: Element> BorrowedBuffer for DeviceSlice<'_, T> {}
impl<T: Element> sealed::SealedBorrowed for &mut DeviceSlice<'_, T> {}
impl<T: Element> BorrowedBuffer for &mut DeviceSlice<'_, T> {}

impl<B: BorrowedBuffer, const N: usize> sealed::SealedBorrowed for [B; N] {}
impl<B: BorrowedBuffer, const N: usize> BorrowedTensors for [B; N] {}
impl<B: BorrowedBuffer> sealed::SealedBorrowed for Vec<B> {}
impl<B: BorrowedBuffer> BorrowedTensors for Vec<B> {}
impl sealed::SealedBorrowed for TensorList<'_> {}
impl BorrowedTensors for TensorList<'_> {}

/// A buffer a collective only reads ([`crate::Comm::check_replicas`]): a
/// shared or mutable borrow of a slice or `Vec`, or a `Vec`.
pub trait View: sealed::SealedView {
    #[doc(hidden)]
    fn view(&self) -> ddp_tensor;
}

macro_rules! view {
    ($($t:ty),*) => {$(
        impl<T: Element> sealed::SealedView for $t {}
        impl<T: Element> View for $t {
            fn view(&self) -> ddp_tensor {
                describe(self.as_ptr(), self.len())
            }
        }
    )*};
}
view!(&[T], &Vec<T>, &mut [T], &mut Vec<T>, Vec<T>);

impl<T: Element> sealed::SealedView for DeviceSlice<'_, T> {}
impl<T: Element> View for DeviceSlice<'_, T> {
    fn view(&self) -> ddp_tensor {
        self.tensor()
    }
}
impl<T: Element> sealed::SealedView for &DeviceSlice<'_, T> {}
impl<T: Element> View for &DeviceSlice<'_, T> {
    fn view(&self) -> ddp_tensor {
        self.tensor()
    }
}

/// A [`View`] that is a borrow, not an owned `Vec`.
pub trait BorrowedView: View + sealed::SealedBorrowed {}
impl<T: Element> sealed::SealedBorrowed for &[T] {}
impl<T: Element> BorrowedView for &[T] {}
impl<T: Element> sealed::SealedBorrowed for &Vec<T> {}
impl<T: Element> BorrowedView for &Vec<T> {}
impl<T: Element> BorrowedView for &mut [T] {}
impl<T: Element> BorrowedView for &mut Vec<T> {}
impl<T: Element> BorrowedView for DeviceSlice<'_, T> {}
impl<T: Element> sealed::SealedBorrowed for &DeviceSlice<'_, T> {}
impl<T: Element> BorrowedView for &DeviceSlice<'_, T> {}

/// A [`Views`] list that only borrows its buffers (an array or `Vec` of
/// [`BorrowedView`]s, or a [`TensorList`]), as the inputs of an async
/// request: the list may be dropped while libddp reads the buffers. Sealed,
/// as [`Views`] is.
pub trait BorrowedViews: Views {}
impl<V: BorrowedView, const N: usize> BorrowedViews for [V; N] {}
impl<V: BorrowedView> BorrowedViews for Vec<V> {}
impl BorrowedViews for TensorList<'_> {}

/// A list of tensors a collective only reads: an array, slice or `Vec` of
/// [`View`]s, or a [`TensorList`].
///
/// ```
/// let comm = ddp::Comm::init()?;
/// let (weights, bias) = (vec![1.0f32; 4], vec![0u8; 2]);
/// assert!(comm.check_replicas(&[&weights])?.is_identical());
/// let mut list = ddp::TensorList::new();
/// # let (mut weights, mut bias) = (weights, bias);
/// list.push(&mut weights).push(&mut bias);
/// assert!(comm.check_replicas(&list)?.is_identical());
/// # Ok::<(), ddp::Error>(())
/// ```
pub trait Views: sealed::SealedViews {
    #[doc(hidden)]
    fn views(&self) -> Vec<ddp_tensor>;
}

impl<V: View> sealed::SealedViews for [V] {}
impl<V: View> Views for [V] {
    fn views(&self) -> Vec<ddp_tensor> {
        self.iter().map(View::view).collect()
    }
}
impl<V: View, const N: usize> sealed::SealedViews for [V; N] {}
impl<V: View, const N: usize> Views for [V; N] {
    fn views(&self) -> Vec<ddp_tensor> {
        self.as_slice().views()
    }
}
impl<V: View> sealed::SealedViews for Vec<V> {}
impl<V: View> Views for Vec<V> {
    fn views(&self) -> Vec<ddp_tensor> {
        self.as_slice().views()
    }
}
impl sealed::SealedViews for TensorList<'_> {}
impl Views for TensorList<'_> {
    fn views(&self) -> Vec<ddp_tensor> {
        self.tensors.clone()
    }
}
