//! Threads of every process in one group (run under `mpirun -np N`):
//! `Comm::init_local(2)` in each process makes ranks process × 2 + thread of
//! one group across the processes. Collectives, alltoall, splits into groups
//! of processes × threads (and the shape refused on every rank), one
//! thread's bad root failing every rank of every process at once, and
//! devices where no GPU runs NCCL failing every process saying why.
mod mpi_harness;

use std::time::{Duration, Instant};

use ddp::{Comm, ErrorKind, InitOptions, Op};

const THREADS: usize = 2;

/// Starts this process's threads of a group and runs `body(comm)` on a
/// thread per rank; the results in thread order.
fn on_threads<T: Send>(body: impl Fn(&Comm) -> T + Sync) -> Vec<T> {
    let options = InitOptions { timeout: Some(Duration::from_secs(60)), ..Default::default() };
    let comms = Comm::init_local_with(THREADS, &options).expect("init_local under mpirun");
    let body = &body;
    std::thread::scope(|threads| {
        let ranks: Vec<_> = comms.into_iter().map(|comm| threads.spawn(move || body(&comm))).collect();
        ranks.into_iter().map(|rank| rank.join().unwrap()).collect()
    })
}

fn ranks_span_the_processes_and_reduce_together(_: &()) {
    let results = on_threads(|comm| {
        let mut grads = vec![comm.rank() as f32; 5000];
        comm.allreduce(&mut [&mut grads], Op::Sum).unwrap();
        (comm.rank(), comm.size(), grads[4999])
    });
    let size = results[0].1;
    assert_eq!(size % THREADS as i32, 0);
    let process = results[0].0 / THREADS as i32;
    for (thread, (rank, ranks, sum)) in results.into_iter().enumerate() {
        assert_eq!((rank, ranks), (process * THREADS as i32 + thread as i32, size));
        assert_eq!(sum, (size * (size - 1) / 2) as f32);
    }
}

fn alltoall_sends_each_block_to_its_rank(_: &()) {
    for (rank, received) in on_threads(|comm| {
        let size = comm.size() as i64;
        // Block j, to rank j, says who sent it and to whom.
        let tokens: Vec<i64> = (0..size).flat_map(|to| [i64::from(comm.rank()) * 100 + to; 3]).collect();
        let mut received = vec![-1i64; tokens.len()];
        comm.alltoall(&[&tokens], &mut [&mut received]).unwrap();
        (i64::from(comm.rank()), received)
    }) {
        let expected: Vec<i64> = (0..received.len() as i64 / 3).flat_map(|from| [from * 100 + rank; 3]).collect();
        assert_eq!(received, expected);
    }
}

fn splits_make_groups_of_processes_times_threads(_: &()) {
    for (thread, result) in on_threads(|comm| {
        let thread = comm.rank() % THREADS as i32;
        let processes = comm.size() / THREADS as i32;
        // A group per thread number, across the processes.
        let sub = comm.split(Some(thread as u32), comm.rank()).unwrap().expect("every rank has a thread number");
        let mut values = vec![i64::from(comm.rank()); 100];
        sub.allreduce(&mut [&mut values], Op::Sum).unwrap();
        let placed = (sub.rank(), sub.size(), values[99]);
        drop(sub);
        // Ranks interleaved across the processes by key: not such a group.
        let refused = comm.split(Some(0), thread * 100 + comm.rank() / THREADS as i32).map(|sub| sub.is_some());
        (placed, processes, refused)
    })
    .into_iter()
    .enumerate()
    {
        let ((sub_rank, sub_size, sum), processes, refused) = result;
        assert_eq!(sub_size, processes);
        let expected: i64 = (0..i64::from(processes)).map(|p| p * THREADS as i64 + thread as i64).sum();
        assert_eq!(sum, expected);
        assert!(sub_rank < processes);
        if processes > 1 {
            let error = refused.unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
            assert!(error.message().contains("color 0"), "{error}");
        }
    }
}

fn a_bad_root_on_one_thread_of_one_process_fails_every_rank_at_once(_: &()) {
    for (started, result) in on_threads(|comm| {
        let root = if comm.rank() == 1 { 99 } else { 0 };
        let mut params = vec![0.0f32; 10];
        let started = Instant::now();
        (started, comm.broadcast(&mut [&mut params], root).map(|()| ()))
    }) {
        let error = result.unwrap_err();
        assert!(matches!(error.kind(), ErrorKind::InvalidArgument | ErrorKind::Mismatch), "{error}");
        assert!(error.message().contains("rank 1"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(20), "the peers must not wait for the 60 s timeout");
    }
}

fn devices_where_no_gpu_can_run_nccl_fail_every_process_saying_why(_: &()) {
    // Where a GPU runs it, scripts/gpu-proof tests the group's data.
    let started = Instant::now();
    if let Err(error) = Comm::init_local_on(&[0, 0], &InitOptions::default()) {
        assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
        assert!(["GPU", "NCCL", "nccl", "CUDA"].iter().any(|word| error.message().contains(word)), "{error}");
        assert!(started.elapsed() < Duration::from_secs(20), "every process fails at once");
    }
}

fn main() {
    let status = mpi_harness::run(
        &(),
        &[
            ("ranks_span_the_processes_and_reduce_together", ranks_span_the_processes_and_reduce_together),
            ("alltoall_sends_each_block_to_its_rank", alltoall_sends_each_block_to_its_rank),
            ("splits_make_groups_of_processes_times_threads", splits_make_groups_of_processes_times_threads),
            (
                "a_bad_root_on_one_thread_of_one_process_fails_every_rank_at_once",
                a_bad_root_on_one_thread_of_one_process_fails_every_rank_at_once,
            ),
            (
                "devices_where_no_gpu_can_run_nccl_fail_every_process_saying_why",
                devices_where_no_gpu_can_run_nccl_fail_every_process_saying_why,
            ),
        ],
    );
    std::process::exit(status);
}
