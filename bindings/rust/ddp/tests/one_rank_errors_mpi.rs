//! Bad input on ONE rank only (run under `mpirun -np N`, N >= 2): that rank
//! gets its own `Err`, and every peer an `Err` naming it, at once, never a
//! hang. Every call here has a per-call timeout, so a peer that waited for
//! the bad rank would fail with `ErrorKind::Timeout`, which the tests reject.
mod mpi_harness;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use ddp::{CollectiveOptions, Collectives, Comm, DeviceSlice, Error, ErrorKind, Op, TensorList};

/// Far longer than any of these calls takes when no rank waits for another.
fn patient(comm: &Comm) -> Collectives<'_> {
    comm.with(CollectiveOptions::new().timeout(Duration::from_secs(60)))
}

/// The rank that gets the bad input: the last one.
fn bad_rank(comm: &Comm) -> i32 {
    comm.size() - 1
}

/// The bad rank failed with `own`; every peer failed, not by timing out, with
/// a message naming the bad rank.
fn check_blamed(comm: &Comm, result: ddp::Result<()>, own: ErrorKind) -> Error {
    let err = result.expect_err("a call with bad input on one rank succeeded");
    let bad = bad_rank(comm);
    if comm.rank() == bad {
        assert_eq!(err.kind(), own, "{err}");
    } else {
        assert_ne!(err.kind(), ErrorKind::Timeout, "a peer waited for the bad rank: {err}");
        assert!(err.message().contains(&format!("rank {bad}")), "the peer's error does not name rank {bad}: {err}");
    }
    err
}

/// The communicator still works for everyone afterwards.
fn still_works(comm: &Comm) {
    let mut one = vec![1i64];
    patient(comm).allreduce(&mut [&mut one], Op::Sum).unwrap();
    assert_eq!(one[0], comm.size() as i64);
}

fn wrong_length_slice(comm: &Comm) {
    let len = if comm.rank() == bad_rank(comm) { 9 } else { 10 };
    let mut grads = vec![1.0f32; len];
    check_blamed(comm, patient(comm).allreduce(&mut [&mut grads[..]], Op::Sum), ErrorKind::Mismatch);
    still_works(comm);
}

fn one_more_tensor_in_the_list(comm: &Comm) {
    let (mut a, mut b) = (vec![1.0f64; 3], vec![2.0f64; 3]);
    let result = if comm.rank() == bad_rank(comm) {
        patient(comm).allreduce(&mut [&mut a, &mut b], Op::Avg)
    } else {
        patient(comm).allreduce(&mut [&mut a], Op::Avg)
    };
    check_blamed(comm, result, ErrorKind::Mismatch);
    still_works(comm);
}

fn mixed_list_with_another_dtype(comm: &Comm) {
    let mut weights = vec![1.0f32; 4];
    let (mut steps, mut steps_f64) = (vec![1i64], vec![1.0f64]);
    let mut list = TensorList::new();
    list.push(&mut weights);
    if comm.rank() == bad_rank(comm) {
        list.push(&mut steps_f64);
    } else {
        list.push(&mut steps);
    }
    check_blamed(comm, patient(comm).allreduce(&mut list, Op::Sum), ErrorKind::Mismatch);
    still_works(comm);
}

fn integer_average_on_one_rank(comm: &Comm) {
    let mut counts = vec![3i32; 5];
    let op = if comm.rank() == bad_rank(comm) { Op::Avg } else { Op::Sum };
    check_blamed(comm, patient(comm).allreduce(&mut [&mut counts], op), ErrorKind::InvalidArgument);
    assert_eq!(counts, vec![3; 5], "nothing reduced");
    still_works(comm);
}

fn root_out_of_range_on_one_rank(comm: &Comm) {
    let mut params = vec![0.5f32; 4];
    let root = if comm.rank() == bad_rank(comm) { comm.size() } else { 0 };
    check_blamed(comm, patient(comm).broadcast(&mut [&mut params], root), ErrorKind::InvalidArgument);
    still_works(comm);
}

fn optimizer_state_with_one_scalar_more(comm: &Comm) {
    let mut moments = vec![0.1f32; 6];
    let mut scalars = vec![1.0; if comm.rank() == bad_rank(comm) { 3 } else { 2 }];
    let result = patient(comm).sync_optimizer_state(&mut [&mut moments], &mut scalars, 0);
    check_blamed(comm, result, ErrorKind::Mismatch);
    still_works(comm);
}

fn another_fusion_size_on_one_rank(comm: &Comm) {
    let options = CollectiveOptions::new().timeout(Duration::from_secs(60));
    let options = if comm.rank() == bad_rank(comm) { options.no_fusion() } else { options };
    let (mut a, mut b) = (vec![1.0f32; 3], vec![1.0f32; 3]);
    check_blamed(comm, comm.with(options).allreduce(&mut [&mut a, &mut b], Op::Sum), ErrorKind::Mismatch);
    // The options held for that call only.
    comm.allreduce(&mut [&mut a, &mut b], Op::Sum).unwrap();
    assert_eq!(a[0], comm.size() as f32);
}

fn barrier_against_allreduce(comm: &Comm) {
    let mut data = vec![1.0f32; 2];
    let result = if comm.rank() == bad_rank(comm) {
        patient(comm).barrier()
    } else {
        patient(comm).allreduce(&mut [&mut data], Op::Sum)
    };
    check_blamed(comm, result, ErrorKind::Mismatch);
    still_works(comm);
}

fn device_memory_on_one_rank(comm: &Comm) {
    assert_eq!(comm.device(), None, "this test needs a rank without a GPU");
    let mut host = vec![1.0f32; 4];
    let result = if comm.rank() == bad_rank(comm) {
        // SAFETY: no GPU: libddp refuses it before reading or writing it.
        let device = unsafe { DeviceSlice::from_raw_parts(host.as_mut_ptr(), host.len(), 0) };
        patient(comm).allreduce(&mut [device], Op::Sum)
    } else {
        patient(comm).allreduce(&mut [&mut host], Op::Sum)
    };
    check_blamed(comm, result, ErrorKind::Unsupported);
    still_works(comm);
}

fn async_request_with_another_length(comm: &Comm) {
    let mut grads = vec![1.0f32; if comm.rank() == bad_rank(comm) { 2 } else { 3 }];
    let result = patient(comm).scope(|s| s.allreduce_async([&mut grads], Op::Sum)?.wait()).unwrap();
    check_blamed(comm, result, ErrorKind::Mismatch);
    still_works(comm);
}

fn async_integer_average_on_one_rank(comm: &Comm) {
    let mut counts = vec![1i64; 4];
    let op = if comm.rank() == bad_rank(comm) { Op::Avg } else { Op::Sum };
    let result = patient(comm).scope(|s| s.allreduce_async([&mut counts], op)?.wait()).unwrap();
    check_blamed(comm, result, ErrorKind::InvalidArgument);
    still_works(comm);
}

fn reducer_registered_with_another_length(comm: &Comm) {
    let (weights, bias) = (vec![0.0f32; 8], vec![0.0f32; if comm.rank() == bad_rank(comm) { 3 } else { 2 }]);
    let result = patient(comm).reducer(&[&weights, &bias], Op::Avg).map(drop);
    check_blamed(comm, result, ErrorKind::Mismatch);
    still_works(comm);
}

fn reducer_of_integers_averaged_on_one_rank(comm: &Comm) {
    let counts = vec![0i32; 4];
    let op = if comm.rank() == bad_rank(comm) { Op::Avg } else { Op::Sum };
    let result = patient(comm).reducer(&[&counts], op).map(drop);
    check_blamed(comm, result, ErrorKind::InvalidArgument);
    still_works(comm);
}

/// An argument refused before any data moved is the bad rank's own error;
/// its peers get a mismatch naming it, long before their 60 s timeout.
fn check_refused(comm: &Comm, result: ddp::Result<()>, started: Instant) -> Error {
    let err = check_blamed(comm, result, ErrorKind::InvalidArgument);
    if comm.rank() != bad_rank(comm) {
        assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
    }
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    still_works(comm);
    err
}

/// Names that do not fit the list are refused, saying so.
fn check_names_blamed(comm: &Comm, result: ddp::Result<()>, started: Instant) {
    let err = check_refused(comm, result, started);
    assert!(err.message().contains("names"), "{err}");
}

fn names_of_another_count_on_one_rank(comm: &Comm) {
    let names: &[&str] = if comm.rank() == bad_rank(comm) { &["w"] } else { &["w", "b"] };
    let options = CollectiveOptions::new().timeout(Duration::from_secs(60)).names(names);
    let (mut w, mut b) = (vec![1.0f32; 3], vec![1.0f32; 2]);
    let started = Instant::now();
    check_names_blamed(comm, comm.with(options.clone()).allreduce(&mut [&mut w, &mut b], Op::Sum), started);
    let started = Instant::now();
    let result = comm.with(options).scope(|s| s.allreduce_async([&mut w, &mut b], Op::Sum)?.wait()).unwrap();
    check_names_blamed(comm, result, started);
}

fn name_with_a_nul_byte_on_one_rank(comm: &Comm) {
    let name = if comm.rank() == bad_rank(comm) { "w\0" } else { "w" };
    let options = CollectiveOptions::new().timeout(Duration::from_secs(60)).names(&[name]);
    let weights = vec![1.0f32; 3];
    let started = Instant::now();
    check_names_blamed(comm, comm.with(options).reducer(&[&weights], Op::Avg).map(drop), started);
}

/// libddp's check of the outputs, blocking and async.
fn gather_and_scatter_into_a_wrong_length_output(comm: &Comm) {
    let (size, bad) = (comm.size() as usize, comm.rank() == bad_rank(comm));
    let shard = vec![1.0f32; 4];
    let mut full = vec![0.0f32; if bad { 4 * size - 1 } else { 4 * size }];
    let started = Instant::now();
    let err = check_refused(comm, patient(comm).allgather(&[&shard], &mut [&mut full]), started);
    assert!(!bad || err.message().contains("outputs[0]"), "{err}");
    let grads = vec![1.0f32; 4 * size];
    let mut shard = vec![0.0f32; if bad { 5 } else { 4 }];
    let started = Instant::now();
    let result = patient(comm).scope(|s| s.reduce_scatter_async([&grads], [&mut shard], Op::Sum)?.wait()).unwrap();
    let err = check_refused(comm, result, started);
    assert!(!bad || err.message().contains("outputs[0]"), "{err}");
}

/// libddp's checks of alltoall's lists on one rank, blocking and async: a
/// length that is not a multiple of the size, an output of another length,
/// an output of another element type.
fn alltoall_of_what_does_not_fit_on_one_rank(comm: &Comm) {
    let (size, bad) = (comm.size() as usize, comm.rank() == bad_rank(comm));
    let tokens = vec![1.0f32; if bad { 2 * size + 1 } else { 2 * size }];
    let mut received = vec![0.0f32; tokens.len()];
    let started = Instant::now();
    let err = check_refused(comm, patient(comm).alltoall(&[&tokens], &mut [&mut received]), started);
    let words = format!("count is {}, not a multiple of the {size} ranks alltoall sends its blocks to", 2 * size + 1);
    assert!(err.message().contains(&words), "{err}");
    let tokens = vec![1.0f32; 2 * size];
    let mut received = vec![0.0f32; if bad { 2 * size + 2 } else { 2 * size }];
    let started = Instant::now();
    let result = patient(comm).scope(|s| s.alltoall_async([&tokens], [&mut received])?.wait()).unwrap();
    let err = check_refused(comm, result, started);
    assert!(err.message().contains("outputs[0].count"), "{err}");
    let started = Instant::now();
    let err = if bad {
        let mut wide = vec![0.0f64; 2 * size];
        check_refused(comm, patient(comm).alltoall(&[&tokens], &mut [&mut wide]), started)
    } else {
        let mut received = vec![0.0f32; 2 * size];
        check_refused(comm, patient(comm).alltoall(&[&tokens], &mut [&mut received]), started)
    };
    assert!(err.message().contains("outputs[0].dtype is f64 but inputs[0].dtype is f32"), "{err}");
}

/// This crate's check: the C call takes one count for both lists.
fn more_inputs_than_outputs_on_one_rank(comm: &Comm) {
    let size = comm.size() as usize;
    let (a, b) = (vec![1.0f64; 2 * size], vec![2.0f64; 2 * size]);
    let inputs = if comm.rank() == bad_rank(comm) { vec![&a, &b] } else { vec![&a] };
    let (mut full, mut shard) = (vec![0.0f64; 2 * size * size], vec![0.0f64; 2]);
    let started = Instant::now();
    let err = check_refused(comm, patient(comm).allgather(&inputs, &mut [&mut full]), started);
    assert!(err.message().contains("inputs for 1 outputs"), "{err}");
    let started = Instant::now();
    let result =
        patient(comm).scope(|s| s.reduce_scatter_async(inputs.clone(), [&mut shard], Op::Sum)?.wait()).unwrap();
    let err = check_refused(comm, result, started);
    assert!(err.message().contains("inputs for 1 outputs"), "{err}");
}

/// One training step on a two-gradient reducer; `backward` fills and marks
/// the gradients and may fail. Returns the step's result (backward's error
/// first), after the step has ended on this rank.
fn reducer_step(
    comm: &Comm,
    backward: impl FnOnce(&ddp::Step<'_, '_>) -> ddp::Result<()>,
) -> (ddp::Result<()>, ddp::Reducer<'_>) {
    let (weights, bias) = (vec![0.0f32; 6], vec![0.0f32; 2]);
    let mut reducer = patient(comm).reducer(&[&weights, &bias], Op::Avg).unwrap();
    let step = reducer.step();
    // A failed backward returns early: dropping the step ends it, as wait would.
    let result = backward(&step).and_then(|()| step.wait());
    (result, reducer)
}

fn mark_every_gradient(step: &ddp::Step<'_, '_>) -> ddp::Result<()> {
    for mut grad in step.gradients::<f32>()?.into_iter().rev() {
        grad.fill(1.0);
        step.mark_ready(grad)?;
    }
    Ok(())
}

fn reducer_step_copying_a_wrong_length_slice(comm: &Comm) {
    let bad = comm.rank() == bad_rank(comm);
    let (result, reducer) = reducer_step(comm, |step| {
        let mut bias = step.gradient::<f32>(1)?;
        bias.copy_from(if bad { &[1.0; 3] } else { &[1.0; 2] })?;
        step.mark_ready(bias)?;
        let mut weights = step.gradient::<f32>(0)?;
        weights.copy_from(&[1.0; 6])?;
        step.mark_ready(weights)
    });
    let err = check_blamed(comm, result, ErrorKind::InvalidArgument);
    if bad {
        assert!(err.message().contains("gradient 1"), "{err}");
    }
    drop(reducer);
    still_works(comm);
}

fn reducer_step_taking_a_view_of_another_type(comm: &Comm) {
    let bad = comm.rank() == bad_rank(comm);
    let (result, reducer) = reducer_step(comm, |step| {
        if bad {
            step.gradient::<f64>(1).map(drop)?;
        }
        mark_every_gradient(step)
    });
    check_blamed(comm, result, ErrorKind::InvalidArgument);
    drop(reducer);
    still_works(comm);
}

fn reducer_step_panicking_on_one_rank(comm: &Comm) {
    let bad = comm.rank() == bad_rank(comm);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        reducer_step(comm, |step| {
            let mut bias = step.gradient::<f32>(1)?;
            bias.fill(1.0);
            step.mark_ready(bias)?;
            if bad {
                panic!("the bad rank's backward pass panics mid-step");
            }
            mark_every_gradient_left(step)
        })
        .0
    }));
    match outcome {
        Err(_) => assert!(bad, "only the bad rank panics"),
        Ok(result) => {
            assert!(!bad, "the bad rank's panic went missing");
            let err = result.expect_err("the peers' step succeeded without the bad rank");
            assert_ne!(err.kind(), ErrorKind::Timeout, "a peer waited for the panicking rank: {err}");
            assert!(err.message().contains(&format!("rank {}", bad_rank(comm))), "{err}");
        }
    }
    still_works(comm);
}

fn mark_every_gradient_left(step: &ddp::Step<'_, '_>) -> ddp::Result<()> {
    let mut weights = step.gradient::<f32>(0)?;
    weights.fill(1.0);
    step.mark_ready(weights)
}

fn reducer_steps_work_after_a_failed_one(comm: &Comm) {
    let (weights, bias) = (vec![0.0f32; 6], vec![0.0f32; 2]);
    let mut reducer = patient(comm).reducer(&[&weights, &bias], Op::Avg).unwrap();
    let bad = comm.rank() == bad_rank(comm);
    let step = reducer.step();
    if !bad {
        mark_every_gradient(&step).unwrap();
    }
    check_blamed(comm, step.wait(), ErrorKind::Mismatch);
    let step = reducer.step();
    mark_every_gradient(&step).unwrap();
    step.wait().unwrap();
    assert_eq!(reducer.gradient::<f32>(0).unwrap(), [1.0; 6]);
}

/// Last: it breaks the communicator. The bad rank aborts (its own error, say
/// a NaN loss); its next call fails with its reason, every peer's naming it.
fn abort_on_one_rank_tells_every_peer(comm: &Comm) {
    let bad = bad_rank(comm);
    if comm.rank() == bad {
        comm.abort("NaN loss in step 7").unwrap();
    }
    let mut grads = vec![1.0f32; 4];
    let err = patient(comm).allreduce(&mut [&mut grads], Op::Sum).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    if comm.rank() == bad {
        assert!(err.message().contains("NaN loss in step 7"), "{err}");
    } else {
        assert!(err.message().contains(&format!("rank {bad} aborted")), "{err}");
    }
}

fn main() {
    let comm = Comm::init().expect("ddp init");
    assert_eq!(comm.backend_name(), "mpi", "run under mpirun");
    assert!(comm.size() >= 2, "run on 2 or more ranks");
    let tests: [(&str, fn(&Comm)); 24] = [
        ("wrong_length_slice", wrong_length_slice),
        ("one_more_tensor_in_the_list", one_more_tensor_in_the_list),
        ("mixed_list_with_another_dtype", mixed_list_with_another_dtype),
        ("integer_average_on_one_rank", integer_average_on_one_rank),
        ("root_out_of_range_on_one_rank", root_out_of_range_on_one_rank),
        ("optimizer_state_with_one_scalar_more", optimizer_state_with_one_scalar_more),
        ("another_fusion_size_on_one_rank", another_fusion_size_on_one_rank),
        ("barrier_against_allreduce", barrier_against_allreduce),
        ("device_memory_on_one_rank", device_memory_on_one_rank),
        ("async_request_with_another_length", async_request_with_another_length),
        ("async_integer_average_on_one_rank", async_integer_average_on_one_rank),
        ("reducer_registered_with_another_length", reducer_registered_with_another_length),
        ("reducer_of_integers_averaged_on_one_rank", reducer_of_integers_averaged_on_one_rank),
        ("names_of_another_count_on_one_rank", names_of_another_count_on_one_rank),
        ("name_with_a_nul_byte_on_one_rank", name_with_a_nul_byte_on_one_rank),
        ("gather_and_scatter_into_a_wrong_length_output", gather_and_scatter_into_a_wrong_length_output),
        ("more_inputs_than_outputs_on_one_rank", more_inputs_than_outputs_on_one_rank),
        ("alltoall_of_what_does_not_fit_on_one_rank", alltoall_of_what_does_not_fit_on_one_rank),
        ("reducer_step_copying_a_wrong_length_slice", reducer_step_copying_a_wrong_length_slice),
        ("reducer_step_taking_a_view_of_another_type", reducer_step_taking_a_view_of_another_type),
        ("reducer_step_panicking_on_one_rank", reducer_step_panicking_on_one_rank),
        ("reducer_steps_work_after_a_failed_one", reducer_steps_work_after_a_failed_one),
        ("every_rank_still_agrees", still_works),
        ("abort_on_one_rank_tells_every_peer", abort_on_one_rank_tells_every_peer),
    ];
    let status = mpi_harness::run(&comm, &tests);
    drop(comm);
    std::process::exit(status);
}
