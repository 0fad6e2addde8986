//! The collectives on 2 or more ranks (run under `mpirun -np N`): every dtype
//! and op against a reference computed from every rank's inputs, mismatched
//! lists, invalid input, async, allgather, reduce_scatter and alltoall, the
//! sampler's coverage.
mod mpi_harness;

use ddp::half::{bf16, f16};
use ddp::{CollectiveOptions, Comm, Element, ErrorKind, Op, Sampler, TensorList};

/// Rank r's input: small values that every dtype holds exactly, some negative.
fn input(rank: i32, len: usize) -> Vec<f64> {
    (0..len).map(|i| ((rank as usize * 7 + i * 3) % 11) as f64 - 3.0).collect()
}

/// The reduction of all ranks' inputs, in f64.
fn reference(size: i32, len: usize, op: Op) -> Vec<f64> {
    let inputs: Vec<Vec<f64>> = (0..size).map(|r| input(r, len)).collect();
    (0..len)
        .map(|i| {
            let column = inputs.iter().map(|v| v[i]);
            match op {
                Op::Sum => column.sum(),
                Op::Avg => column.sum::<f64>() / size as f64,
                Op::Min => column.fold(f64::INFINITY, f64::min),
                Op::Max => column.fold(f64::NEG_INFINITY, f64::max),
                Op::Prod => column.product(),
            }
        })
        .collect()
}

/// Reduces `input` as T with `op` and compares with the reference.
fn check_dtype<T: Element + PartialEq + std::fmt::Debug>(
    comm: &Comm,
    op: Op,
    from: impl Fn(f64) -> T,
    to: impl Fn(T) -> f64,
    tolerance: f64,
) {
    let (rank, size) = (comm.rank(), comm.size());
    // Lengths around the fusion threshold: fused, and alone in place.
    for len in [1usize, 33, 70_000] {
        let mut data: Vec<T> = input(rank, len).into_iter().map(&from).collect();
        comm.allreduce(&mut [&mut data], op).unwrap();
        let expected = reference(size, len, op);
        for (i, (&got, want)) in data.iter().zip(expected).enumerate() {
            let got = to(got);
            assert!((got - want).abs() <= tolerance * want.abs().max(1.0), "{op:?} len {len} [{i}]: {got} != {want}");
        }
    }
}

fn every_dtype_and_op(comm: &Comm) {
    for op in [Op::Sum, Op::Min, Op::Max, Op::Prod, Op::Avg] {
        check_dtype(comm, op, |x| x as f32, f64::from, 1e-6);
        check_dtype(comm, op, |x| x, |x| x, 1e-12);
        check_dtype(comm, op, f16::from_f64, f16::to_f64, 1e-2);
        check_dtype(comm, op, bf16::from_f64, bf16::to_f64, 1e-2);
        if op != Op::Avg {
            // Integer products wrap; the values here stay in range for i32 and i64.
            check_dtype(comm, op, |x| x as i32, f64::from, 0.0);
            check_dtype(comm, op, |x| x as i64, |x| x as f64, 0.0);
            if op != Op::Prod {
                check_dtype(comm, op, |x| x as i8, f64::from, 0.0);
            }
            if matches!(op, Op::Min | Op::Max) {
                // u8 holds the inputs shifted by 3; min and max commute with the shift.
                check_dtype(comm, op, |x| (x + 3.0) as u8, |x| f64::from(x) - 3.0, 0.0);
            }
        }
    }
}

fn u8_sum_wraps(comm: &Comm) {
    let size = comm.size();
    let mut data = vec![200u8; 5];
    comm.allreduce(&mut [&mut data], Op::Sum).unwrap();
    assert_eq!(data, vec![(200u32 * size as u32 % 256) as u8; 5]);
}

fn mixed_list(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size());
    let mut a = vec![rank as f32; 3];
    let mut b = vec![rank as i64 + 1; 2];
    let mut c = vec![bf16::from_f32(1.0); 4];
    let mut list = TensorList::new();
    list.push(&mut a).push(&mut b).push(&mut c);
    comm.allreduce(&mut list, Op::Sum).unwrap();
    let ranks: i64 = (0..size as i64).sum();
    assert_eq!(a, vec![ranks as f32; 3]);
    assert_eq!(b, vec![ranks + size as i64; 2]);
    assert_eq!(c[0].to_f32(), size as f32);
}

fn mismatched_lengths_fail_on_every_rank(comm: &Comm) {
    let rank = comm.rank();
    let mut data = vec![1.0f32; if rank == 0 { 4 } else { 5 }];
    let err = comm.allreduce(&mut [&mut data], Op::Sum).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
    assert!(err.message().contains("rank"), "{err}");
    assert_eq!(data, vec![1.0; data.len()], "nothing reduced");
}

fn mismatched_dtypes_fail_on_every_rank(comm: &Comm) {
    let rank = comm.rank();
    let mut floats = vec![1.0f32; 4];
    let mut ints = vec![1i32; 4];
    let err = if rank == 1 {
        comm.allreduce(&mut [&mut ints], Op::Sum).unwrap_err()
    } else {
        comm.allreduce(&mut [&mut floats], Op::Sum).unwrap_err()
    };
    assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
}

fn mismatched_roots_fail_on_every_rank(comm: &Comm) {
    let rank = comm.rank();
    let mut data = vec![1.0f64; 2];
    let err = comm.broadcast(&mut [&mut data], if rank == 0 { 0 } else { 1 }).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
}

fn one_invalid_rank_fails_every_rank(comm: &Comm) {
    let rank = comm.rank();
    let mut data = vec![1i32; 3];
    let op = if rank == 0 { Op::Avg } else { Op::Sum };
    let err = comm.allreduce(&mut [&mut data], op).unwrap_err();
    if rank == 0 {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.message().contains("AVG") || err.message().contains("avg"), "{err}");
    } else {
        assert_ne!(err.kind(), ErrorKind::InvalidArgument, "peers learn of rank 0's error: {err}");
    }
}

fn broadcast_reduce_and_optimizer_state(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size());
    let root = size - 1;
    let mut params = vec![rank as f64; 10];
    let mut step = vec![rank as i64];
    comm.broadcast(&mut [&mut params], root).unwrap();
    comm.broadcast(&mut [&mut step], root).unwrap();
    assert_eq!((params[9], step[0]), (root as f64, root as i64));

    let mut value = vec![rank as f32 + 1.0];
    comm.reduce(&mut [&mut value], Op::Max, 0).unwrap();
    assert_eq!(value[0], if rank == 0 { size as f32 } else { rank as f32 + 1.0 });

    let mut m = vec![rank as f32; 3];
    let mut scalars = [rank as f64, 0.5 * rank as f64];
    comm.sync_optimizer_state(&mut [&mut m], &mut scalars, 1).unwrap();
    assert_eq!((m, scalars), (vec![1.0; 3], [1.0, 0.5]));

    // A different structure on one rank: every rank fails, nothing is overwritten.
    let mut scalars = vec![rank as f64; if rank == 0 { 1 } else { 2 }];
    let mut m = vec![rank as f32; 3];
    let err = comm.sync_optimizer_state(&mut [&mut m], &mut scalars, 0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
    assert_eq!(m, vec![rank as f32; 3]);
}

fn check_replicas_reports_a_difference(comm: &Comm) {
    let rank = comm.rank();
    let same = vec![1.0f32; 8];
    assert!(comm.check_replicas(&[&same]).unwrap().is_identical());
    let differs = vec![rank as f32; 8];
    match comm.check_replicas(&vec![same.clone(), differs]).unwrap() {
        ddp::Replicas::Differ(message) => assert!(message.contains("1"), "{message}"),
        ddp::Replicas::Identical => panic!("rank-dependent tensors reported identical"),
    }
    comm.barrier().unwrap();
}

fn async_allreduce(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size());
    let mut big = vec![rank as f32; 100_000];
    let mut small = vec![1i32; 7];
    let mut forgotten = vec![1.0f64; 3];
    comm.scope(|s| {
        let first = s.allreduce_async([&mut big], Op::Avg).unwrap();
        // Forgotten, never waited for: the scope still waits for it.
        #[allow(clippy::forget_non_drop)]
        std::mem::forget(s.allreduce_async([&mut forgotten], Op::Sum).unwrap());
        let second = s.allreduce_async(vec![&mut small], Op::Sum).unwrap();
        while !first.test().unwrap() {
            std::thread::yield_now();
        }
        first.wait().unwrap();
        second.wait().unwrap();
    })
    .unwrap();
    let mean = (0..size).sum::<i32>() as f32 / size as f32;
    assert_eq!((big[0], big[99_999]), (mean, mean));
    assert_eq!(small, vec![size; 7]);
    assert_eq!(forgotten, vec![size as f64; 3]);

    // A mismatch is reported by wait, on every rank.
    let mut uneven = vec![0.0f32; if rank == 0 { 2 } else { 3 }];
    let err = comm.scope(|s| s.allreduce_async([&mut uneven], Op::Sum).unwrap().wait()).unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
    // ...and by the scope when nobody waited.
    let err = comm.scope(|s| drop(s.allreduce_async([&mut uneven], Op::Sum).unwrap())).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
}

/// Gathers `input` as T from every rank, fused (two small tensors) and
/// alone (a large one), and compares with every rank's input in rank order.
fn check_allgather<T: Element + PartialEq + std::fmt::Debug>(comm: &Comm, from: impl Fn(f64) -> T) {
    let (rank, size) = (comm.rank(), comm.size() as usize);
    let lens = [1usize, 33, 70_000];
    let inputs: Vec<Vec<T>> = lens.iter().map(|&len| input(rank, len).into_iter().map(&from).collect()).collect();
    let mut outputs: Vec<Vec<T>> = lens.iter().map(|&len| vec![from(0.0); len * size]).collect();
    comm.allgather(&inputs, &mut outputs.iter_mut().collect::<Vec<_>>()).unwrap();
    for (&len, output) in lens.iter().zip(&outputs) {
        let expected: Vec<T> = (0..size as i32).flat_map(|r| input(r, len)).map(&from).collect();
        assert!(output == &expected, "allgather of {len} elements");
    }
}

/// Reduce-scatters `input` as T with `op` and compares this rank's shard
/// with the reference.
fn check_reduce_scatter<T: Element>(comm: &Comm, op: Op, from: impl Fn(f64) -> T, to: impl Fn(T) -> f64) {
    let (rank, size) = (comm.rank() as usize, comm.size());
    let shards = [1usize, 10, 40_000];
    let inputs: Vec<Vec<T>> =
        shards.iter().map(|&c| input(rank as i32, c * size as usize).into_iter().map(&from).collect()).collect();
    let mut outputs: Vec<Vec<T>> = shards.iter().map(|&c| vec![from(0.0); c]).collect();
    comm.reduce_scatter(&inputs, &mut outputs.iter_mut().collect::<Vec<_>>(), op).unwrap();
    for (&c, output) in shards.iter().zip(outputs) {
        let expected = &reference(size, c * size as usize, op)[rank * c..(rank + 1) * c];
        for (i, (got, &want)) in output.into_iter().map(&to).zip(expected).enumerate() {
            assert!((got - want).abs() <= 1e-2 * want.abs().max(1.0), "{op:?} shard {c} [{i}]: {got} != {want}");
        }
    }
}

fn allgather_and_reduce_scatter_every_dtype(comm: &Comm) {
    check_allgather(comm, |x| x as f32);
    check_allgather(comm, |x| x);
    check_allgather(comm, f16::from_f64);
    check_allgather(comm, bf16::from_f64);
    check_allgather(comm, |x| x as i32);
    check_allgather(comm, |x| x as i64);
    check_allgather(comm, |x| x as i8);
    check_allgather(comm, |x| (x + 3.0) as u8);
    for op in [Op::Sum, Op::Avg, Op::Max] {
        check_reduce_scatter(comm, op, |x| x as f32, f64::from);
        check_reduce_scatter(comm, op, |x| x, |x| x);
        check_reduce_scatter(comm, op, f16::from_f64, f16::to_f64);
        check_reduce_scatter(comm, op, bf16::from_f64, bf16::to_f64);
    }
    check_reduce_scatter(comm, Op::Sum, |x| x as i64, |x| x as f64);
    check_reduce_scatter(comm, Op::Min, |x| x as i8, f64::from);
}

/// ZeRO's step: a reduce_scatter of the gradients then an allgather of the
/// shards is an allreduce; mixed lists, small buckets and names on the way.
fn reduce_scatter_then_allgather_is_allreduce(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size() as usize);
    let mut grads = input(rank, 30 * size);
    let mut steps: Vec<i64> = input(rank, 3 * size).into_iter().map(|x| x as i64).collect();
    let (mut grads_shard, mut steps_shard) = (vec![0.0f64; 30], vec![0i64; 3]);
    let (mut grads_full, mut steps_full) = (vec![0.0f64; 30 * size], vec![0i64; 3 * size]);
    let zero = comm.with(CollectiveOptions::new().fusion_bytes(64).names(&["grads", "steps"]));
    let (mut inputs, mut shards) = (TensorList::new(), TensorList::new());
    inputs.push(&mut grads).push(&mut steps);
    shards.push(&mut grads_shard).push(&mut steps_shard);
    zero.reduce_scatter(&inputs, &mut shards, Op::Sum).unwrap();
    let mut full = TensorList::new();
    full.push(&mut grads_full).push(&mut steps_full);
    zero.allgather(&shards, &mut full).unwrap();
    comm.allreduce(&mut inputs, Op::Sum).unwrap();
    assert_eq!((grads_full, steps_full), (grads, steps));
}

/// Every rank passes the same uneven input: every rank's own error, naming it.
fn uneven_reduce_scatter_names_the_tensor(comm: &Comm) {
    let size = comm.size() as usize;
    let (even, uneven) = (vec![1.0f32; 2 * size], vec![1.0f32; 2 * size + 1]);
    let (mut a, mut b) = (vec![0.0f32; 2], vec![0.0f32; 2]);
    let err = comm.reduce_scatter(&[&even, &uneven], &mut [&mut a, &mut b], Op::Sum).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("inputs[1]") && err.message().contains("multiple"), "{err}");
    let err = comm.scope(|s| s.reduce_scatter_async([&uneven], [&mut a], Op::Sum).map(drop)).unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("inputs[0]"), "{err}");
    assert_eq!((a, b), (vec![0.0; 2], vec![0.0; 2]), "nothing written");
}

fn async_allgather_and_reduce_scatter(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size() as usize);
    let grads = vec![rank as f32 + 1.0; 4 * size];
    let params = vec![rank as i64; 5];
    let (mut shard, mut gathered) = (vec![0.0f32; 4], vec![0i64; 5 * size]);
    comm.scope(|s| {
        let scattered = s.reduce_scatter_async([&grads], [&mut shard], Op::Sum).unwrap();
        let gathering = s.allgather_async(vec![&params], vec![&mut gathered]).unwrap();
        scattered.wait().unwrap();
        gathering.wait().unwrap();
    })
    .unwrap();
    assert_eq!(shard, vec![(1..=size).sum::<usize>() as f32; 4]);
    assert_eq!(gathered, (0..size as i64).flat_map(|r| [r; 5]).collect::<Vec<_>>());
}

/// Exchanges `input` as T, fused (two small tensors) and alone (a large one),
/// with libddp's fusion and without, and compares block `r` of every output
/// with block `rank` of rank `r`'s input.
fn check_alltoall<T: Element + PartialEq + std::fmt::Debug>(comm: &Comm, from: impl Fn(f64) -> T) {
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    let blocks = [1usize, 33, 70_000];
    let inputs: Vec<Vec<T>> =
        blocks.iter().map(|&c| input(rank as i32, c * size).into_iter().map(&from).collect()).collect();
    for (fused, options) in [(true, CollectiveOptions::new()), (false, CollectiveOptions::new().no_fusion())] {
        let mut outputs: Vec<Vec<T>> = blocks.iter().map(|&c| vec![from(0.0); c * size]).collect();
        comm.with(options).alltoall(&inputs, &mut outputs.iter_mut().collect::<Vec<_>>()).unwrap();
        for (&c, output) in blocks.iter().zip(&outputs) {
            let expected: Vec<T> = (0..size as i32)
                .flat_map(|r| input(r, c * size)[rank * c..(rank + 1) * c].to_vec())
                .map(&from)
                .collect();
            assert!(output == &expected, "alltoall of blocks of {c} elements, fused: {fused}");
        }
    }
}

fn alltoall_every_dtype(comm: &Comm) {
    check_alltoall(comm, |x| x as f32);
    check_alltoall(comm, |x| x);
    check_alltoall(comm, f16::from_f64);
    check_alltoall(comm, bf16::from_f64);
    check_alltoall(comm, |x| x as i32);
    check_alltoall(comm, |x| x as i64);
    check_alltoall(comm, |x| x as i8);
    check_alltoall(comm, |x| (x + 3.0) as u8);
}

/// Block j of block r is block r of block j: exchanging twice gives the
/// input back; mixed lists, small buckets and names on the way.
fn alltoall_twice_gives_the_input_back(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size() as usize);
    let (mut tokens, mut ids) =
        (input(rank, 30 * size), input(rank, 3 * size).into_iter().map(|x| x as i64).collect::<Vec<_>>());
    let (original_tokens, original_ids) = (tokens.clone(), ids.clone());
    let (mut sent_tokens, mut sent_ids) = (vec![0.0f64; 30 * size], vec![0i64; 3 * size]);
    let moe = comm.with(CollectiveOptions::new().fusion_bytes(64).names(&["tokens", "ids"]));
    let (mut inputs, mut sent) = (TensorList::new(), TensorList::new());
    inputs.push(&mut tokens).push(&mut ids);
    sent.push(&mut sent_tokens).push(&mut sent_ids);
    moe.alltoall(&inputs, &mut sent).unwrap();
    moe.alltoall(&sent, &mut inputs).unwrap();
    drop((inputs, sent));
    assert_eq!((tokens, ids), (original_tokens, original_ids));
}

/// Every rank passes the same uneven input: every rank's own error, naming it.
fn uneven_alltoall_names_the_tensor(comm: &Comm) {
    let size = comm.size() as usize;
    if size == 1 {
        return; // every length is a multiple of 1
    }
    let (even, uneven) = (vec![1.0f32; 2 * size], vec![1.0f32; 2 * size + 1]);
    let (mut a, mut b) = (vec![0.0f32; 2 * size], vec![0.0f32; 2 * size + 1]);
    let err = comm.alltoall(&[&even, &uneven], &mut [&mut a, &mut b]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("inputs[1]") && err.message().contains("multiple"), "{err}");
    let err = comm.scope(|s| s.alltoall_async([&uneven], [&mut b]).map(drop)).unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("inputs[0]"), "{err}");
    assert!(a.iter().chain(&b).all(|&x| x == 0.0), "nothing written");
}

fn async_alltoall(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size() as usize);
    let tokens: Vec<f32> = (0..4 * size).map(|i| (rank as usize * 100 + i / 4) as f32).collect();
    let ids = vec![rank as i64; 5 * size];
    let (mut received, mut received_ids) = (vec![0.0f32; 4 * size], vec![0i64; 5 * size]);
    comm.scope(|s| {
        let first = s.alltoall_async([&tokens], [&mut received]).unwrap();
        let second = s.alltoall_async(vec![&ids], vec![&mut received_ids]).unwrap();
        first.wait().unwrap();
        second.wait().unwrap();
    })
    .unwrap();
    // Block r came from rank r: its block for this rank.
    let expected: Vec<f32> = (0..size).flat_map(|r| [(r * 100 + rank as usize) as f32; 4]).collect();
    assert_eq!(received, expected);
    assert_eq!(received_ids, (0..size as i64).flat_map(|r| [r; 5]).collect::<Vec<_>>());
}

fn reducer_averages_every_rank_gradients(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size());
    let like = (vec![0.0f32; 3000], vec![0.0f32; 5], vec![0.0f64; 3]);
    let mut list = TensorList::new();
    let (mut a, mut b, mut c) = like.clone();
    list.push(&mut a).push(&mut b).push(&mut c);
    // Small buckets: several reductions in flight while gradients are computed.
    let mut reducer = comm.with(ddp::CollectiveOptions::new().fusion_bytes(256)).reducer(&list, Op::Avg).unwrap();
    let value = |r: i32, i: usize, j: usize, step: usize| (r as usize * 10 + i * 3 + j % 7 + step) as f64;
    let mean = |i: usize, j: usize, step: usize| (0..size).map(|r| value(r, i, j, step)).sum::<f64>() / size as f64;
    for step_number in 0..3 {
        let step = reducer.step();
        // The backward pass: the last gradients first, each marked as it is done.
        let mut c = step.gradient::<f64>(2).unwrap();
        c.iter_mut().enumerate().for_each(|(j, g)| *g = value(rank, 2, j, step_number));
        step.mark_ready(c).unwrap();
        let grads: Vec<_> = (0..2).map(|i| step.gradient::<f32>(i).unwrap()).collect();
        for mut grad in grads.into_iter().rev() {
            let i = grad.index();
            grad.iter_mut().enumerate().for_each(|(j, g)| *g = value(rank, i, j, step_number) as f32);
            step.mark_ready(grad).unwrap();
        }
        step.wait().unwrap();
        for i in 0..2 {
            let grad = reducer.gradient::<f32>(i).unwrap();
            assert!(grad.iter().enumerate().all(|(j, &g)| g as f64 == mean(i, j, step_number)), "gradient {i}");
        }
        let grad = reducer.gradient::<f64>(2).unwrap();
        assert!(grad.iter().enumerate().all(|(j, &g)| g == mean(2, j, step_number)), "gradient 2");
    }
}

fn sampler_covers_every_item(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size());
    for n in [10usize, 97, 1000] {
        let mut sampler = Sampler::new(comm, n).unwrap().seed(3);
        for epoch in 0..3 {
            sampler.set_epoch(epoch);
            let mut seen = vec![0i32; n];
            let mine: Vec<usize> = sampler.iter().unwrap().collect();
            assert_eq!(mine.len(), (n + size as usize - 1) / size as usize);
            for &i in &mine {
                seen[i] += 1;
            }
            comm.allreduce(&mut [&mut seen], Op::Sum).unwrap();
            assert!(seen.iter().all(|&c| c >= 1), "n {n} epoch {epoch}: an item no rank took");
            assert_eq!(seen.iter().sum::<i32>() as usize, mine.len() * size as usize);
            // The same shard as the pure function (and so as C and Python).
            let opts = ddp::ShardOptions { seed: 3, epoch, ..Default::default() };
            let direct = ddp::shard_indices(n as i64, rank, size, &opts).unwrap();
            assert_eq!(mine, direct.iter().map(|&i| i as usize).collect::<Vec<_>>());
        }
    }
}

/// Every list call passes its names to the timeline; each rank names its own.
fn timeline_names_the_tensors(comm: &Comm) {
    let rank = comm.rank();
    let folder = std::env::temp_dir().join(format!("ddp-rust-names-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let named = |names: &[&str]| {
        let names: Vec<String> = names.iter().map(|name| format!("{name}.r{rank}")).collect();
        comm.with(CollectiveOptions::new().names(&names))
    };
    let (mut w, mut b) = (vec![1.0f32; 6], vec![1.0f32; 2]);
    let timeline = comm.timeline(folder.join("trace.json")).unwrap();
    named(&["all.w", "all.b"]).allreduce(&mut [&mut w, &mut b], Op::Sum).unwrap();
    named(&["bcast.w"]).broadcast(&mut [&mut w], 0).unwrap();
    named(&["red.b"]).reduce(&mut [&mut b], Op::Sum, 0).unwrap();
    named(&["opt.m"]).sync_optimizer_state(&mut [&mut w], &mut [1.0], 0).unwrap();
    named(&["async.b"]).scope(|s| s.allreduce_async([&mut b], Op::Sum)?.wait()).unwrap().unwrap();
    drop(named(&["grad.w", "grad.b"]).reducer(&[&w, &b], Op::Avg).unwrap());
    timeline.stop().unwrap();
    let trace = std::fs::read_to_string(folder.join(format!("trace.rank{rank}.json"))).unwrap();
    for names in ["\"all.w", "\"all.b", "\"bcast.w", "\"red.b", "\"opt.m", "\"async.b", "\"grad.w", "\"grad.b"] {
        assert!(trace.contains(&format!("{names}.r{rank}\"")), "{names} missing from {trace}");
    }
    std::fs::remove_dir_all(folder).unwrap();
}

fn log_from_every_rank(comm: &Comm) {
    comm.log(ddp::LogLevel::Debug, "collectives_mpi: log line").unwrap();
}

fn main() {
    let comm = Comm::init().expect("ddp init");
    assert_eq!(comm.backend_name(), "mpi", "run under mpirun");
    let tests: [(&str, fn(&Comm)); 22] = [
        ("every_dtype_and_op", every_dtype_and_op),
        ("u8_sum_wraps", u8_sum_wraps),
        ("mixed_list", mixed_list),
        ("mismatched_lengths_fail_on_every_rank", mismatched_lengths_fail_on_every_rank),
        ("mismatched_dtypes_fail_on_every_rank", mismatched_dtypes_fail_on_every_rank),
        ("mismatched_roots_fail_on_every_rank", mismatched_roots_fail_on_every_rank),
        ("one_invalid_rank_fails_every_rank", one_invalid_rank_fails_every_rank),
        ("broadcast_reduce_and_optimizer_state", broadcast_reduce_and_optimizer_state),
        ("check_replicas_reports_a_difference", check_replicas_reports_a_difference),
        ("async_allreduce", async_allreduce),
        ("allgather_and_reduce_scatter_every_dtype", allgather_and_reduce_scatter_every_dtype),
        ("reduce_scatter_then_allgather_is_allreduce", reduce_scatter_then_allgather_is_allreduce),
        ("uneven_reduce_scatter_names_the_tensor", uneven_reduce_scatter_names_the_tensor),
        ("async_allgather_and_reduce_scatter", async_allgather_and_reduce_scatter),
        ("alltoall_every_dtype", alltoall_every_dtype),
        ("alltoall_twice_gives_the_input_back", alltoall_twice_gives_the_input_back),
        ("uneven_alltoall_names_the_tensor", uneven_alltoall_names_the_tensor),
        ("async_alltoall", async_alltoall),
        ("reducer_averages_every_rank_gradients", reducer_averages_every_rank_gradients),
        ("sampler_covers_every_item", sampler_covers_every_item),
        ("log_from_every_rank", log_from_every_rank),
        ("timeline_names_the_tensors", timeline_names_the_tensors),
    ];
    let status = mpi_harness::run(&comm, &tests);
    drop(comm);
    std::process::exit(status);
}
