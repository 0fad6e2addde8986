//! Several ranks in one process (`Comm::init_local`): each rank's `Comm` moves
//! to a thread of its own, and the threads' collectives meet as processes' do.
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use ddp::{Backend, Comm, ErrorKind, InitOptions, Op};

/// Runs `body(comm)` on one thread per rank; the results in rank order.
fn on_threads<T: Send>(comms: Vec<Comm>, body: impl Fn(Comm) -> T + Sync) -> Vec<T> {
    std::thread::scope(|threads| {
        let ranks: Vec<_> = comms.into_iter().map(|comm| threads.spawn(|| body(comm))).collect();
        ranks.into_iter().map(|rank| rank.join().unwrap()).collect()
    })
}

#[test]
fn threads_reduce_and_broadcast_as_ranks() {
    for n in [1, 2, 3, 4] {
        let comms = Comm::init_local(n).unwrap();
        assert_eq!(comms.iter().map(Comm::rank).collect::<Vec<_>>(), (0..n as i32).collect::<Vec<_>>());
        let results = on_threads(comms, |comm| {
            assert_eq!(comm.size(), n as i32);
            let rank = comm.rank();
            let mut grads = vec![rank as f32 + 1.0; 1000];
            let mut steps = vec![i64::from(rank) * 10; 3];
            comm.allreduce(&mut [&mut grads], Op::Sum).unwrap();
            comm.allreduce(&mut [&mut steps], Op::Sum).unwrap();
            let mut weights = vec![rank as f64; 5];
            comm.broadcast(&mut [&mut weights], 0).unwrap();
            let mut avg = vec![rank as f32; 7];
            comm.allreduce(&mut [&mut avg], Op::Avg).unwrap();
            (grads[999], steps[2], weights[4], avg[0])
        });
        let sum: i64 = (0..n as i64).sum();
        for (grad, step, weight, avg) in results {
            assert_eq!(grad, (sum + n as i64) as f32);
            assert_eq!(step, sum * 10);
            assert_eq!(weight, 0.0);
            assert_eq!(avg, sum as f32 / n as f32);
        }
    }
}

#[test]
fn a_thread_passing_another_list_fails_every_rank_with_a_mismatch_naming_it() {
    let results = on_threads(Comm::init_local(3).unwrap(), |comm| {
        let mut first = vec![1.0f32; 10];
        let mut second = vec![1.0f32; 20];
        if comm.rank() == 1 {
            comm.allreduce(&mut [&mut first], Op::Sum)
        } else {
            comm.allreduce(&mut [&mut first, &mut second], Op::Sum)
        }
    });
    for result in results {
        let error = result.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Mismatch, "{error}");
        assert!(error.message().contains("rank 1"), "{error}");
    }
}

#[test]
fn a_bad_argument_on_one_thread_fails_its_peers_at_once() {
    let timeout = Duration::from_secs(30);
    let comms = Comm::init_local_with(2, &InitOptions { timeout: Some(timeout), ..Default::default() }).unwrap();
    let results = on_threads(comms, |comm| {
        let started = std::time::Instant::now();
        let mut weights = vec![1.0f32; 4];
        let root = if comm.rank() == 1 { 7 } else { 0 };
        (comm.broadcast(&mut [&mut weights], root), started.elapsed())
    });
    let (bad, _) = &results[1];
    let error = bad.as_ref().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(error.message().contains("root"), "{error}");
    let (peer, waited) = &results[0];
    let error = peer.as_ref().unwrap_err();
    assert!(error.message().contains("rank 1"), "{error}");
    assert!(*waited < timeout / 2, "the peer waited {waited:?}");
}

#[test]
fn a_thread_that_never_calls_is_named_in_its_peers_timeout() {
    let comms =
        Comm::init_local_with(2, &InitOptions { timeout: Some(Duration::from_secs(1)), ..Default::default() }).unwrap();
    let (gave_up, given_up) = mpsc::channel();
    let given_up = Mutex::new(given_up);
    let results = on_threads(comms, |comm| {
        if comm.rank() == 1 {
            // Computes until rank 0 has given up, then ends without a call.
            wait_for(&given_up);
            return None;
        }
        let mut grads = vec![1.0f32; 100];
        let result = comm.allreduce(&mut [&mut grads], Op::Sum);
        gave_up.send(()).unwrap();
        Some(result)
    });
    let error = results[0].clone().unwrap().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Timeout, "{error}");
    assert!(error.message().contains("rank 1 has not joined"), "{error}");
}

/// Waits (at most 10 s) for a word from another thread.
fn wait_for(word: &Mutex<mpsc::Receiver<()>>) {
    let _ = word.lock().unwrap().recv_timeout(Duration::from_secs(10));
}

#[test]
fn bad_groups_are_refused_naming_what_is_wrong() {
    let error = Comm::init_local(0).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.message().contains("n is 0"), "{error}");
    let error = Comm::init_local(usize::MAX).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    let error = Comm::init_local_with(2, &InitOptions { backend: Backend::Mpi, ..Default::default() }).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(error.message().contains("backend"), "{error}");
}

#[test]
fn threads_split_into_sub_groups_that_reduce_apart() {
    let results = on_threads(Comm::init_local(4).unwrap(), |comm| {
        // Even and odd ranks apart, ranked backwards; rank 2 joins none.
        let rank = comm.rank();
        let color = if rank == 2 { None } else { Some(rank as u32 % 2) };
        let sub = comm.split(color, -rank).unwrap()?;
        let mut value = vec![i64::from(rank); 1000];
        sub.allreduce(&mut [&mut value], Op::Sum).unwrap();
        Some((sub.rank(), sub.size(), value[999]))
    });
    assert_eq!(results, vec![Some((0, 1, 0)), Some((1, 2, 4)), None, Some((0, 2, 4))]);
}

#[test]
fn devices_where_no_gpu_can_run_nccl_fail_saying_why() {
    // Where a GPU runs it, scripts/gpu-proof tests the group's data.
    if let Err(error) = Comm::init_local_on(&[0, 0], &InitOptions::default()) {
        assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
        assert!(["GPU", "NCCL", "nccl", "CUDA"].iter().any(|word| error.message().contains(word)), "{error}");
    }
    let error = Comm::init_local_on(&[0, u32::MAX], &InitOptions::default()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(error.message().contains("devices[1]"), "{error}");
}
