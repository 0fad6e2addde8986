//! Per-call overhead of the safe Rust API against the C call it makes.
//!
//! Each round times, in shuffled order, `ROUND` allreduces of a list of N
//! 4-byte f32 tensors (N = 1, 8, 64) through
//!  - `c`: `ddp_allreduce_tensor_list` called directly through ddp-sys
//!    with descriptors built once, exactly what a C program does;
//!  - `rust`: `Comm::allreduce(&mut [&mut t0, ...], Op::Sum)`, which builds
//!    the descriptors on every call.
//!
//! Prints the median microseconds per call of each and their ratio, on one
//! process (the `self` backend: pure call overhead) or under mpirun.
//!
//!     cargo bench --bench overhead -- ROUNDS CSV_PATH LABEL
use std::time::Instant;

use ddp::{Comm, Op};
use ddp_sys::{ddp_collective_options, ddp_device_type, ddp_dtype, ddp_op, ddp_status, ddp_tensor};

const ROUND: usize = 2000;

fn c_call(comm: &Comm, tensors: &mut [Vec<f32>], opts: &ddp_collective_options) -> f64 {
    let list: Vec<ddp_tensor> = tensors
        .iter_mut()
        .map(|t| ddp_tensor {
            data: t.as_mut_ptr().cast(),
            count: t.len() as i64,
            dtype: ddp_dtype::DDP_DTYPE_F32 as i32,
            device_type: ddp_device_type::DDP_DEVICE_CPU as i32,
            device_id: 0,
            flags: 0,
        })
        .collect();
    let start = Instant::now();
    for _ in 0..ROUND {
        let status = unsafe {
            ddp_sys::ddp_allreduce_tensor_list(
                comm.as_raw(),
                list.as_ptr(),
                list.len() as i64,
                ddp_op::DDP_OP_SUM,
                opts,
            )
        };
        assert_eq!(status, ddp_status::DDP_OK);
    }
    start.elapsed().as_secs_f64() / ROUND as f64 * 1e6
}

fn rust_call(comm: &Comm, tensors: &mut [Vec<f32>]) -> f64 {
    let mut list: Vec<&mut Vec<f32>> = tensors.iter_mut().collect();
    let start = Instant::now();
    for _ in 0..ROUND {
        comm.allreduce(&mut list, Op::Sum).unwrap();
    }
    start.elapsed().as_secs_f64() / ROUND as f64 * 1e6
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let rounds: usize = args.first().map_or(15, |r| r.parse().expect("ROUNDS"));
    let csv = args.get(1).cloned();
    let label = args.get(2).cloned().unwrap_or_default();
    let comm = Comm::init().unwrap();
    let (rank, size) = (comm.rank(), comm.size());
    let mut opts: ddp_collective_options = unsafe { std::mem::zeroed() };
    let status = unsafe {
        ddp_sys::ddp_collective_options_init(&mut opts, std::mem::size_of::<ddp_collective_options>() as u32)
    };
    assert_eq!(status, ddp_status::DDP_OK);

    let mut rows = Vec::new();
    for n in [1usize, 8, 64] {
        let mut tensors = vec![vec![1.0f32]; n];
        let (mut c, mut rust) = (Vec::new(), Vec::new());
        for round in 0..rounds + 2 {
            // Alternate which goes first, so drift touches both alike; 2 warm-up rounds.
            let (t_c, t_rust);
            if round % 2 == 0 {
                t_c = c_call(&comm, &mut tensors, &opts);
                t_rust = rust_call(&comm, &mut tensors);
            } else {
                t_rust = rust_call(&comm, &mut tensors);
                t_c = c_call(&comm, &mut tensors, &opts);
            }
            if round >= 2 {
                c.push(t_c);
                rust.push(t_rust);
            }
        }
        rows.push((n, median(c), median(rust)));
    }
    if rank == 0 {
        println!("{label}: {size} rank(s), median us per allreduce call over {rounds} rounds of {ROUND}");
        println!("{:>8} {:>10} {:>10} {:>11}", "tensors", "c_us", "rust_us", "rust/c");
        let mut lines = Vec::new();
        for (n, c, rust) in rows {
            println!("{n:>8} {c:>10.3} {rust:>10.3} {:>11.3}", rust / c);
            lines.push(format!("{label},{size},{n},{c:.4},{rust:.4},{:.4}\n", rust / c));
        }
        if let Some(path) = csv {
            use std::io::Write;
            let mut file = std::fs::OpenOptions::new().append(true).create(true).open(path).unwrap();
            file.write_all(lines.concat().as_bytes()).unwrap();
        }
    }
}
