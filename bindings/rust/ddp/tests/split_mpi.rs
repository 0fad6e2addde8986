//! Sub-communicators on 2 to 4 ranks (run under `mpirun -np N`): 4 ranks as a
//! 2×2 grid split by row (`rank / 2`, node-like) and by column (`rank % 2`,
//! replicas), collectives and a reducer on both, a ranks' key order, a rank
//! joining none, the node communicator, a timeout in one sub that leaves the
//! others working, one rank's bad color, and a zero timeout meaning the
//! parent's, as in C. Fewer ranks run the same tests on smaller grids.
mod mpi_harness;

use std::time::{Duration, Instant};

use ddp::{CollectiveOptions, Comm, ErrorKind, Op, SplitOptions, SubComm};

fn row_of(rank: i32) -> u32 {
    rank as u32 / 2
}

fn column_of(rank: i32) -> u32 {
    rank as u32 % 2
}

/// The world ranks sharing this rank's color, in world order.
fn members(world: &Comm, color_of: fn(i32) -> u32) -> Vec<i32> {
    (0..world.size()).filter(|&r| color_of(r) == color_of(world.rank())).collect()
}

fn rows(world: &Comm) -> SubComm<'_> {
    world.split(Some(row_of(world.rank())), world.rank()).unwrap().expect("every rank has a row")
}

fn columns(world: &Comm) -> SubComm<'_> {
    world.split(Some(column_of(world.rank())), world.rank()).unwrap().expect("every rank has a column")
}

/// allreduce of (world rank + 1) × scale on `comm`: the sum over `ranks`.
fn check_sum(world: &Comm, comm: &Comm, ranks: &[i32], scale: f64) {
    let mut values = vec![f64::from(world.rank() + 1) * scale; 300]; // beyond what agreement carries
    comm.allreduce(&mut [&mut values], Op::Sum).unwrap();
    let expected: f64 = ranks.iter().map(|&r| f64::from(r + 1) * scale).sum();
    assert!(values.iter().all(|&v| v == expected), "{} != {expected}", values[0]);
}

fn rows_and_columns_have_their_ranks_and_sizes(world: &Comm) {
    let (rows, columns) = (rows(world), columns(world));
    assert_eq!((rows.rank(), rows.size()), (world.rank() % 2, members(world, row_of).len() as i32));
    assert_eq!((columns.rank(), columns.size()), (world.rank() / 2, members(world, column_of).len() as i32));
    assert_eq!((rows.local_rank(), rows.local_size()), (rows.rank(), rows.size())); // one machine
    assert_eq!(rows.backend_name(), "mpi");
    columns.free().unwrap();
    rows.free().unwrap();
}

fn key_orders_the_ranks(world: &Comm) {
    let reversed = world.split(Some(0), world.size() - world.rank()).unwrap().unwrap();
    assert_eq!(reversed.rank(), world.size() - 1 - world.rank());
    let same_keys = world.split(Some(0), 7).unwrap().unwrap();
    assert_eq!(same_keys.rank(), world.rank()); // ties: the world's order
}

fn allreduce_on_rows_and_columns_gives_their_own_sums(world: &Comm) {
    let (rows, columns) = (rows(world), columns(world));
    let (row, column, all) = (members(world, row_of), members(world, column_of), members(world, |_| 0));
    for scale in [1.0, 10.0, 100.0] {
        check_sum(world, &rows, &row, scale);
        check_sum(world, &columns, &column, scale);
        check_sum(world, world, &all, scale);
    }
}

fn every_collective_and_the_reducer_work_on_a_sub(world: &Comm) {
    let columns = columns(world);
    let column = members(world, column_of);
    let (rank, size) = (columns.rank(), columns.size());
    let mut values = vec![f64::from(world.rank()); 5];
    columns.broadcast(&mut [&mut values], size - 1).unwrap();
    assert_eq!(values[0], f64::from(*column.last().unwrap()));
    let mut values = vec![world.rank(); 5];
    columns.reduce(&mut [&mut values], Op::Max, 0).unwrap();
    assert_eq!(values[0], if rank == 0 { *column.last().unwrap() } else { world.rank() });
    let shard = vec![world.rank(); 2];
    let mut gathered = vec![-1; 2 * size as usize];
    columns.allgather(&[&shard], &mut [&mut gathered]).unwrap();
    assert_eq!(gathered, column.iter().flat_map(|&r| [r, r]).collect::<Vec<_>>());
    let grads: Vec<f32> = (0..2 * size).map(|i| i as f32).collect();
    let mut mine = vec![0.0f32; 2];
    columns.reduce_scatter(&[&grads], &mut [&mut mine], Op::Sum).unwrap();
    assert_eq!(mine, [(2 * rank * size) as f32, ((2 * rank + 1) * size) as f32]);
    assert!(columns.check_replicas(&[vec![1.0f32; 3]]).unwrap().is_identical());
    columns.barrier().unwrap();
    // Per-call options, async requests and a reducer, as on the world.
    let mut loss = vec![1.0f64];
    let patient = columns.with(CollectiveOptions::new().timeout(Duration::from_secs(60)));
    patient.allreduce(&mut [&mut loss], Op::Sum).unwrap();
    assert_eq!(loss[0], f64::from(size));
    let mut layer = vec![1.0f32; 1000];
    columns.scope(|s| s.allreduce_async([&mut layer], Op::Sum)?.wait()).unwrap().unwrap();
    assert_eq!(layer[999], size as f32);
    let mut reducer = columns.reducer(&[&vec![0.0f32; 3], &vec![0.0f32; 7]], Op::Avg).unwrap();
    let step = reducer.step();
    let mut gradients = step.gradients::<f32>().unwrap();
    while let Some(mut gradient) = gradients.pop() {
        gradient.fill(world.rank() as f32);
        step.mark_ready(gradient).unwrap();
    }
    step.wait().unwrap();
    let mean = column.iter().sum::<i32>() as f32 / size as f32;
    assert_eq!(reducer.gradient::<f32>(1).unwrap(), [mean; 7]);
}

fn undefined_color_joins_none(world: &Comm) {
    let color = if world.rank() == 0 { None } else { Some(0) };
    let sub = world.split(color, world.rank()).unwrap();
    match sub {
        None => assert_eq!(world.rank(), 0),
        Some(sub) => {
            assert_eq!((sub.rank(), sub.size()), (world.rank() - 1, world.size() - 1));
            check_sum(world, &sub, &(1..world.size()).collect::<Vec<_>>(), 1.0);
        }
    }
    check_sum(world, world, &members(world, |_| 0), 2.0);
}

fn the_node_communicator_holds_this_nodes_ranks(world: &Comm) {
    let node = world.split_node().unwrap();
    assert_eq!((node.rank(), node.size()), (world.local_rank(), world.local_size()));
    // One machine: every rank.
    check_sum(world, &node, &members(world, |_| 0), 1.0);
    // A split of the node outlives it (SubComm::split ties it to the world only).
    let rows = node.split(Some(row_of(world.rank())), world.rank()).unwrap().unwrap();
    node.free().unwrap();
    check_sum(world, &rows, &members(world, row_of), 3.0);
}

fn a_timeout_in_one_sub_leaves_the_world_and_the_other_working(world: &Comm) {
    if world.size() < 2 {
        return;
    }
    let hasty = world.split_with(Some(0), 0, &SplitOptions { timeout: Some(Duration::from_secs(1)) }).unwrap().unwrap();
    let patient = world.split(Some(0), 0).unwrap().unwrap();
    if world.rank() == 0 {
        // Alone: the others never join this barrier.
        let err = hasty.barrier().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        assert!(err.message().starts_with("sub-communicator color 0 (comm_split #"), "{err}");
    }
    let all = members(world, |_| 0);
    check_sum(world, world, &all, 1.0);
    check_sum(world, &patient, &all, 2.0);
    if world.rank() != 0 {
        let err = hasty.barrier().unwrap_err(); // told by rank 0's notice
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        assert!(err.message().contains("rank 0 gave up"), "{err}");
    }
}

/// The bad rank's own error and every peer's, at once: a peer that waited
/// would fail only after the world's 60 s timeout, with `Timeout`.
fn check_blamed(world: &Comm, result: ddp::Result<()>, words: &str, collective: &str) {
    let err = result.expect_err("a split with bad input on one rank succeeded");
    let bad = world.size() - 1;
    if world.rank() == bad {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    } else {
        assert_eq!(err.kind(), ErrorKind::Mismatch, "{err}");
        let blame = format!("rank {bad} passed invalid arguments to {collective}");
        assert!(err.message().contains(&blame), "{err}");
    }
    assert!(err.message().contains(words), "{err}");
    check_sum(world, world, &members(world, |_| 0), 1.0); // every rank is in step again
}

fn a_bad_color_on_one_rank_makes_every_peer_fail_at_once(world: &Comm) {
    let start = Instant::now();
    let color = if world.rank() == world.size() - 1 { u32::MAX } else { 0 };
    let result = world.split(Some(color), 0).map(|sub| assert!(sub.is_none(), "no rank gets one"));
    check_blamed(world, result, "color 4294967295: more than i32::MAX", "comm_split");
    assert!(start.elapsed() < Duration::from_secs(30));
}

/// Zero is the parent's timeout, as 0 is in C: on one rank only it is no
/// error, and a sub split with it from a parent of 2 s holds its calls (with
/// a zero timeout of their own: the sub's) to those 2 s. Rank 0, alone in a
/// barrier there, times out after them, neither at once nor never, and tells
/// the others, who join it only after the world's barrier that rank 0 joins then.
/// (A `Duration` is never negative, NaN or infinite, the timeouts libddp refuses.)
fn a_zero_timeout_means_the_parents(world: &Comm) {
    let all = members(world, |_| 0);
    let zero = SplitOptions { timeout: Some(Duration::ZERO) };
    let one = SplitOptions {
        timeout: Some(if world.rank() == world.size() - 1 { Duration::ZERO } else { Duration::from_secs(60) }),
    };
    let sub = world.split_with(Some(0), 0, &one).unwrap().unwrap();
    check_sum(world, &sub, &all, 1.0);
    sub.free().unwrap();
    let node = world.split_node_with(&zero).unwrap();
    check_sum(world, &node, &all, 2.0);
    node.free().unwrap();
    if world.size() < 2 {
        return;
    }
    let parent =
        world.split_with(Some(0), 0, &SplitOptions { timeout: Some(Duration::from_secs(2)) }).unwrap().unwrap();
    let sub = parent.split_with(Some(0), 0, &zero).unwrap().unwrap();
    let its_own = sub.with(CollectiveOptions::new().timeout(Duration::ZERO));
    if world.rank() == 0 {
        let start = Instant::now();
        let err = its_own.barrier().unwrap_err();
        let waited = start.elapsed();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        assert!(err.message().contains("timed out on rank 0"), "{err}");
        assert!(waited > Duration::from_millis(1500) && waited < Duration::from_secs(10), "{waited:?}: {err}");
        world.barrier().unwrap();
    } else {
        world.barrier().unwrap();
        let err = its_own.barrier().unwrap_err(); // told by rank 0's notice
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        assert!(err.message().contains("rank 0 gave up"), "{err}");
    }
    drop(its_own);
    drop(sub);
    check_sum(world, &parent, &all, 3.0); // the parent is untouched
}

fn main() {
    let world = Comm::init_with(&ddp::InitOptions { timeout: Some(Duration::from_secs(60)), ..Default::default() })
        .expect("init under mpirun");
    let status = mpi_harness::run(
        &world,
        &[
            ("rows_and_columns_have_their_ranks_and_sizes", rows_and_columns_have_their_ranks_and_sizes),
            ("key_orders_the_ranks", key_orders_the_ranks),
            ("allreduce_on_rows_and_columns_gives_their_own_sums", allreduce_on_rows_and_columns_gives_their_own_sums),
            ("every_collective_and_the_reducer_work_on_a_sub", every_collective_and_the_reducer_work_on_a_sub),
            ("undefined_color_joins_none", undefined_color_joins_none),
            ("the_node_communicator_holds_this_nodes_ranks", the_node_communicator_holds_this_nodes_ranks),
            (
                "a_timeout_in_one_sub_leaves_the_world_and_the_other_working",
                a_timeout_in_one_sub_leaves_the_world_and_the_other_working,
            ),
            (
                "a_bad_color_on_one_rank_makes_every_peer_fail_at_once",
                a_bad_color_on_one_rank_makes_every_peer_fail_at_once,
            ),
            ("a_zero_timeout_means_the_parents", a_zero_timeout_means_the_parents),
        ],
    );
    drop(world);
    std::process::exit(status);
}
