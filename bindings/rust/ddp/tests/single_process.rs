//! The safe API on one process (the `self` backend): values, errors with
//! libddp's messages, sharding test vectors, logging, threads.
use std::sync::Mutex;

use ddp::half::{bf16, f16};
use std::time::Duration;

use ddp::{
    Backend, CollectiveOptions, Comm, DeviceSlice, ErrorKind, HangWatchdog, InitOptions, LogLevel, Op, Sampler,
    ShardOptions, SplitOptions, Strategy, TensorList,
};

/// libddp has one live world per process; tests take turns.
static WORLD: Mutex<()> = Mutex::new(());

fn with_comm(test: impl FnOnce(&Comm)) {
    let _turn = WORLD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let comm = Comm::init_with(&InitOptions { backend: Backend::Self_, ..Default::default() }).unwrap();
    test(&comm);
}

#[test]
fn one_rank_world() {
    with_comm(|comm| {
        assert_eq!((comm.rank(), comm.size()), (0, 1));
        assert_eq!((comm.local_rank(), comm.local_size()), (0, 1));
        assert_eq!(comm.device(), None);
        assert_eq!(comm.backend_name(), "self");
    });
}

#[test]
fn every_dtype_and_op_leaves_one_rank_values() {
    with_comm(|comm| {
        for op in [Op::Sum, Op::Min, Op::Max, Op::Prod] {
            let mut a = vec![1.5f32, -2.0];
            let mut b = vec![0.25f64];
            let mut c = vec![-3i8, 4];
            let mut d = vec![7i32];
            let mut e = vec![i64::MAX];
            let mut f = vec![200u8];
            let mut g = vec![f16::from_f32(0.5)];
            let mut h = vec![bf16::from_f32(-8.0)];
            let mut list = TensorList::new();
            list.push(&mut a).push(&mut b).push(&mut c).push(&mut d);
            list.push(&mut e).push(&mut f).push(&mut g).push(&mut h);
            comm.allreduce(&mut list, op).unwrap();
            assert_eq!(
                (a, b, c, d, e, f),
                (vec![1.5, -2.0], vec![0.25], vec![-3, 4], vec![7], vec![i64::MAX], vec![200])
            );
            assert_eq!((g[0].to_f32(), h[0].to_f32()), (0.5, -8.0));
        }
        let mut x = vec![3.0f32; 5];
        comm.allreduce(&mut [&mut x], Op::Avg).unwrap();
        assert_eq!(x, [3.0; 5]);
    });
}

#[test]
fn integer_average_is_an_error_naming_the_tensor() {
    with_comm(|comm| {
        let mut floats = vec![1.0f32];
        let mut ints = vec![1i32];
        let mut list = TensorList::new();
        list.push(&mut floats).push(&mut ints);
        let err = comm.allreduce(&mut list, Op::Avg).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert_eq!(err.status_name(), "DDP_ERR_INVALID_ARGUMENT");
        assert!(err.message().contains("tensor 1") || err.message().contains("tensors[1]"), "{}", err.message());
        assert!(err.to_string().starts_with("DDP_ERR_INVALID_ARGUMENT: "));
        // What `fn main() -> ddp::Result<()>` prints names the public type.
        let debug = format!("{err:?}");
        assert!(debug.starts_with("ddp::Error { kind: InvalidArgument, message: "), "{debug}");
        assert!(!debug.contains("ddp_sys") && !debug.contains("DDP_ERR"), "{debug}");
    });
}

#[test]
fn bad_root_is_an_error() {
    with_comm(|comm| {
        let mut x = vec![1.0f64];
        for root in [-1, 1] {
            let err = comm.broadcast(&mut [&mut x], root).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument);
            assert!(err.message().contains("root"), "{}", err.message());
            let err = comm.reduce(&mut [&mut x], Op::Sum, root).unwrap_err();
            assert!(err.message().contains("root"), "{}", err.message());
        }
    });
}

#[test]
fn collectives_on_one_rank() {
    with_comm(|comm| {
        let mut m = vec![0.5f32; 3];
        let mut scalars = [4.0, 0.01];
        comm.sync_optimizer_state(&mut [&mut m], &mut scalars, 0).unwrap();
        assert_eq!((m, scalars), (vec![0.5; 3], [4.0, 0.01]));
        assert!(comm.check_replicas(&[vec![1u8, 2, 3]]).unwrap().is_identical());
        comm.barrier().unwrap();
        let empty: Vec<&mut [f32]> = Vec::new();
        let mut empty = empty;
        comm.allreduce(&mut empty, Op::Sum).unwrap();
    });
}

#[test]
fn async_in_a_scope() {
    with_comm(|comm| {
        let mut a = vec![2.0f32; 1000];
        let mut b = vec![1i64, 2];
        let done = comm
            .scope(|s| {
                let first = s.allreduce_async([&mut a], Op::Avg).unwrap();
                // Forgotten, never waited for: the scope still waits for it.
                #[allow(clippy::forget_non_drop)]
                std::mem::forget(s.allreduce_async(vec![&mut b], Op::Sum).unwrap());
                first.wait().unwrap();
                7
            })
            .unwrap();
        assert_eq!((done, a[0], b.clone()), (7, 2.0, vec![1, 2]));
        comm.scope(|s| {
            let request = s.allreduce_async([&mut a], Op::Sum).unwrap();
            // SAFETY: the null stream; a host request is waited for on the host.
            unsafe { request.stream_wait(std::ptr::null_mut()) }.unwrap();
            assert!(request.test().unwrap(), "complete after stream_wait");
            request.wait().unwrap();
        })
        .unwrap();
        let err = comm.scope(|s| s.allreduce_async([&mut b], Op::Avg).map(|_| ())).unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    });
}

#[test]
fn per_call_options_are_arguments() {
    with_comm(|comm| {
        let options = CollectiveOptions::new().timeout(Duration::from_secs(5)).fusion_bytes(4096);
        let with = comm.with(options.clone());
        let mut a = vec![1.5f32; 100];
        let mut steps = vec![3i64];
        with.allreduce(&mut [&mut a], Op::Avg).unwrap();
        comm.with(options.no_fusion()).broadcast(&mut [&mut steps], 0).unwrap();
        with.reduce(&mut [&mut a], Op::Max, 0).unwrap();
        with.barrier().unwrap();
        assert!(with.check_replicas(&[&a]).unwrap().is_identical());
        let mut scalars = [1.0];
        with.sync_optimizer_state(&mut [&mut a], &mut scalars, 0).unwrap();
        with.scope(|s| s.allreduce_async([&mut a], Op::Sum).unwrap().wait()).unwrap().unwrap();
        assert_eq!((a[99], steps[0]), (1.5, 3));
        // The options reach libddp: its checks apply to them.
        let err = with.allreduce(&mut [&mut steps], Op::Avg).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    });
}

#[test]
fn names_must_fit_the_list() {
    with_comm(|comm| {
        let (mut a, mut b) = (vec![1.0f32; 4], vec![2.0f32; 2]);
        let named = comm.with(CollectiveOptions::new().names(&["a", "b"]));
        named.allreduce(&mut [&mut a, &mut b], Op::Sum).unwrap();
        named.barrier().unwrap(); // no tensors: the names are not read
        let err = named.broadcast(&mut [&mut a], 0).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("2 names for a list of 1 tensors"), "{err}");
        let err = comm.with(CollectiveOptions::new().names(&["a\0b"])).reducer(&[&a], Op::Sum).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("name 0 (\"a\\0b\") contains a NUL byte"), "{err}");
        comm.allreduce(&mut [&mut a], Op::Sum).unwrap();
    });
}

#[test]
fn reducer_reduces_gradients_in_their_buckets() {
    with_comm(|comm| {
        let (w1, b1) = (vec![0.0f32; 40], vec![0.0f32; 4]);
        let (mut w2, mut counts) = (w1.clone(), vec![0i64; 2]);
        let mut list = TensorList::new();
        list.push(&mut w2).push(&mut counts);
        let mut reducer = comm.with(CollectiveOptions::new().fusion_bytes(64)).reducer(&[&w1, &b1], Op::Avg).unwrap();
        assert_eq!(reducer.len(), 2);
        for step_number in 0..3 {
            let step = reducer.step();
            let mut grads = step.gradients::<f32>().unwrap();
            assert_eq!((grads[0].len(), grads[1].len(), grads[1].index()), (40, 4, 1));
            while let Some(mut grad) = grads.pop() {
                grad.fill(step_number as f32);
                step.mark_ready(grad).unwrap();
            }
            step.wait().unwrap();
            assert_eq!(reducer.gradient::<f32>(1).unwrap(), [step_number as f32; 4]);
        }
        // Mixed element types, registered from a TensorList.
        let mut mixed = comm.reducer(&list, Op::Sum).unwrap();
        let step = mixed.step();
        let mut counts = step.gradient::<i64>(1).unwrap();
        counts.copy_from(&[7, 8]).unwrap();
        step.mark_ready(counts).unwrap();
        step.wait().unwrap(); // the unmarked gradient 0 is reduced here too
        assert_eq!(mixed.gradient::<i64>(1).unwrap(), [7, 8]);
    });
}

#[test]
fn reducer_refuses_what_would_alias_or_misread() {
    with_comm(|comm| {
        let params = vec![0.0f32; 3];
        let mut reducer = comm.reducer(&[&params], Op::Sum).unwrap();
        let mut other = comm.reducer(&[&params], Op::Sum).unwrap();
        let other_step = other.step();
        let foreign = other_step.gradient::<f32>(0).unwrap();
        let step = reducer.step();
        let err = step.gradient::<f64>(0).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("dtype"), "{err}");
        assert!(step.gradient::<f32>(5).is_err(), "index out of range");
        let mut grad = step.gradient::<f32>(0).unwrap();
        let err = step.gradient::<f32>(0).unwrap_err();
        assert!(err.message().contains("already taken"), "{err}");
        let err = grad.copy_from(&[1.0; 4]).unwrap_err();
        assert!(err.message().contains("3 elements"), "{err}");
        let err = step.mark_ready(foreign).unwrap_err();
        assert!(err.message().contains("another reducer"), "{err}");
        step.mark_ready(grad).unwrap();
        step.wait().unwrap();
        drop(other_step); // ends that step as wait would
        let err = comm.reducer(&[vec![0i32; 2]], Op::Avg).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    });
}

#[test]
fn device_memory_without_a_gpu_is_unsupported() {
    with_comm(|comm| {
        assert_eq!(comm.device(), None);
        let mut host = vec![0.0f32; 8];
        // SAFETY: no GPU: libddp refuses device memory before touching it.
        let device = unsafe { DeviceSlice::from_raw_parts(host.as_mut_ptr(), host.len(), 0) };
        assert_eq!((device.len(), device.device()), (8, 0));
        let err = comm.allreduce(&mut [device], Op::Sum).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        let mut list = TensorList::new();
        list.push_device(unsafe { DeviceSlice::from_raw_parts(host.as_mut_ptr(), 2, 0) });
        assert_eq!(comm.allreduce(&mut list, Op::Sum).unwrap_err().kind(), ErrorKind::Unsupported);
    });
}

#[test]
fn nccl_backend_is_selectable() {
    let _turn = WORLD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    match Comm::init_with(&InitOptions { backend: Backend::Nccl, ..Default::default() }) {
        Ok(comm) => {
            assert_eq!(comm.backend_name(), "nccl");
            assert!(comm.device().is_some(), "nccl without a device");
        }
        // No GPU here: libddp says why.
        Err(err) => {
            assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
            assert!(err.message().contains("nccl") || err.message().contains("NCCL"), "{err}");
        }
    }
}

#[test]
fn comm_moves_to_another_thread() {
    let _turn = WORLD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let comm = Comm::init_with(&InitOptions { backend: Backend::Self_, ..Default::default() }).unwrap();
    let rank = std::thread::spawn(move || comm.rank()).join().unwrap();
    assert_eq!(rank, 0);
}

#[test]
fn second_world_and_finalized_comm() {
    let _turn = WORLD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let opts = InitOptions { backend: Backend::Self_, ..Default::default() };
    let comm = Comm::init_with(&opts).unwrap();
    let err = Comm::init_with(&opts).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyInitialized);
    comm.finalize().unwrap();
}

/// Every setting is one libddp takes: `After(Duration::ZERO)` is the default,
/// as `hang_watchdog_s = 0` is in C (a `Duration` is never NaN or infinite,
/// the values libddp refuses).
#[test]
fn hang_watchdog_settings_reach_init() {
    let _turn = WORLD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for hang_watchdog in [
        HangWatchdog::FromEnvironment,
        HangWatchdog::After(Duration::ZERO),
        HangWatchdog::Off,
        HangWatchdog::After(Duration::from_millis(1500)),
    ] {
        let opts = InitOptions { backend: Backend::Self_, hang_watchdog, ..Default::default() };
        Comm::init_with(&opts).unwrap().finalize().unwrap();
    }
}

/// A zero timeout means the default everywhere, as 0 does in C: init's
/// (`DDP_TIMEOUT_S` or 1800 s), a call's (the communicator's), a split's (the
/// parent's). A `Duration` is never negative, NaN or infinite, the timeouts
/// libddp refuses; what is left to check is that zero reaches libddp as 0.
#[test]
fn a_zero_timeout_means_the_default() {
    let _turn = WORLD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let opts = InitOptions { backend: Backend::Self_, timeout: Some(Duration::ZERO), ..Default::default() };
    let comm = Comm::init_with(&opts).unwrap();
    let zero = comm.with(CollectiveOptions::new().timeout(Duration::ZERO));
    let mut a = vec![1.5f32; 4];
    zero.allreduce(&mut [&mut a], Op::Sum).unwrap();
    zero.barrier().unwrap();
    zero.scope(|s| s.allreduce_async([&mut a], Op::Sum).unwrap().wait()).unwrap().unwrap();
    assert_eq!(a, vec![1.5f32; 4]);
    let split = SplitOptions { timeout: Some(Duration::ZERO) };
    let sub = comm.split_with(Some(0), 0, &split).unwrap().unwrap();
    sub.with(CollectiveOptions::new().timeout(Duration::ZERO)).barrier().unwrap();
    sub.free().unwrap();
    comm.split_node_with(&split).unwrap().free().unwrap();
    comm.finalize().unwrap();
}

#[test]
fn adopting_a_communicator_needs_mpi() {
    let _turn = WORLD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let opts = InitOptions { backend: Backend::Self_, mpi_comm_fortran: Some(0), ..Default::default() };
    let err = Comm::init_with(&opts).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("mpi_comm_fortran"), "{}", err.message());
    let opts = InitOptions { backend: Backend::Mpi, mpi_comm_fortran: Some(-5), ..Default::default() };
    let err = Comm::init_with(&opts).unwrap_err();
    assert!(err.message().contains("mpi_comm_fortran"), "{}", err.message());
}

#[test]
fn shards_match_the_header_test_vectors() {
    let opts = ShardOptions { seed: 42, ..Default::default() };
    let strided: Vec<Vec<i64>> = (0..3).map(|rank| ddp::shard_indices(10, rank, 3, &opts).unwrap()).collect();
    assert_eq!(strided, [vec![0, 8, 7, 3], vec![9, 6, 2, 0], vec![5, 4, 1, 9]]);
    let contiguous = ShardOptions { strategy: Strategy::Contiguous, ..opts };
    assert_eq!(ddp::shard_indices(10, 1, 3, &contiguous).unwrap(), [6, 4, 7, 2]);
    let drop_last = ShardOptions { drop_last: true, ..opts };
    assert_eq!(ddp::shard_indices(10, 2, 3, &drop_last).unwrap(), [5, 4, 1]);
    let unshuffled = ShardOptions { shuffle: false, ..opts };
    assert_eq!(ddp::shard_indices(10, 1, 3, &unshuffled).unwrap(), [1, 4, 7, 0]);
    // Epoch 1's order is 7 5 8 0 9 6 2 1 4 3: rank 0 takes 7 0 2 3.
    let mut sampler = Sampler::for_rank(10, 0, 3).seed(42);
    sampler.set_epoch(1);
    assert_eq!(sampler.iter().unwrap().collect::<Vec<_>>(), [7, 0, 2, 3]);
    assert_eq!(sampler.len().unwrap(), 4);
}

#[test]
fn bad_shard_arguments_are_errors() {
    let opts = ShardOptions::default();
    let err = ddp::shard_indices(10, 3, 3, &opts).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("rank"), "{}", err.message());
    let err = ddp::shard_count(10, 0, &opts).unwrap_err();
    assert!(err.message().contains("world"), "{}", err.message());
    assert!(Sampler::for_rank(10, 5, 2).iter().is_err());
}

/// Collects the lines logged with target "ddp".
struct Capture(Mutex<Vec<(log::Level, String)>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        if record.target() == "ddp" {
            self.0.lock().unwrap().push((record.level(), record.args().to_string()));
        }
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

#[test]
fn log_lines_reach_the_log_crate() {
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
    with_comm(|comm| {
        comm.log(LogLevel::Warn, "rust says hello").unwrap();
        let lines = CAPTURE.0.lock().unwrap().clone();
        let line = lines.iter().find(|(_, line)| line.contains("rust says hello")).expect("line not captured");
        assert_eq!(line.0, log::Level::Warn);
        assert!(line.1.starts_with("[ddp 0/1 "), "{}", line.1);
        let err = comm.log(LogLevel::Info, "nul \0 byte").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    });
    ddp::logging::route_to_stderr();
}
