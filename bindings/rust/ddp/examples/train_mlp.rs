//! A small MLP trained data-parallel with libddp: the C example
//! (examples/c/train_mlp.c) in Rust, with the same data, model and steps.
//!
//! Every rank builds the same synthetic regression set, takes its shard with
//! a `Sampler`, computes gradients on its own mini-batches straight into a
//! reducer's buckets (marking each ready as the backward pass finishes it, so
//! its bucket is averaged while the rest is computed), and waits once per
//! step, so all ranks take the same SGD step. Rank 0 initialises the parameters and broadcasts them, logs the loss
//! per epoch, and at the end `check_replicas` confirms every rank holds the
//! same parameters.
//!
//!     mpirun -np 2 target/debug/examples/train_mlp
//!     target/debug/examples/train_mlp --local 2    (2 ranks as threads of one
//!                                                  process, no mpirun: the same losses)
//!
//! Exits 0 when the loss fell below a fifth of its start and the replicas
//! agree, 1 otherwise (2 when a libddp call failed).
use ddp::{Comm, Gradient, LogLevel, Op, Replicas, Sampler};

const INPUTS: usize = 8;
const HIDDEN: usize = 32;
const SAMPLES: usize = 4096;
const BATCH: usize = 32;
const EPOCHS: u64 = 30;
const LEARNING_RATE: f32 = 0.2;

/// The C example's generator, so both draw the same numbers.
struct Lcg(u64);

impl Lcg {
    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f64 / (1u64 << 24) as f64) as f32 * 2.0 - 1.0
    }
}

/// The order of the model's tensors, and of their gradients in the reducer.
const W1: usize = 0;
const B1: usize = 1;
const W2: usize = 2;
const B2: usize = 3;

/// The model's tensors.
struct Params {
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
}

impl Params {
    fn zeros() -> Self {
        Params { w1: vec![0.0; HIDDEN * INPUTS], b1: vec![0.0; HIDDEN], w2: vec![0.0; HIDDEN], b2: vec![0.0] }
    }

    fn tensors(&mut self) -> [&mut Vec<f32>; 4] {
        [&mut self.w1, &mut self.b1, &mut self.w2, &mut self.b2]
    }

    /// Adds the gradient of one sample's squared error to `grads` (views of
    /// the reducer's buckets, in tensor order); returns that error.
    fn backprop(&self, x: &[f32], y: f32, grads: &mut [Gradient<'_, f32>]) -> f32 {
        let mut h = [0f32; HIDDEN];
        let mut out = self.b2[0];
        for (k, h) in h.iter_mut().enumerate() {
            let row = &self.w1[k * INPUTS..(k + 1) * INPUTS];
            *h = (self.b1[k] + row.iter().zip(x).map(|(w, x)| w * x).sum::<f32>()).tanh();
            out += self.w2[k] * *h;
        }
        let err = out - y;
        grads[B2][0] += err;
        for (k, &h) in h.iter().enumerate() {
            grads[W2][k] += err * h;
            let da = err * self.w2[k] * (1.0 - h * h);
            grads[B1][k] += da;
            let row = &mut grads[W1][k * INPUTS..(k + 1) * INPUTS];
            row.iter_mut().zip(x).for_each(|(g, x)| *g += da * x);
        }
        err * err
    }
}

/// The same data set on every rank: y = sin(2 x . teacher) + 0.5.
fn make_data() -> (Vec<f32>, Vec<f32>) {
    let mut rng = Lcg(12345);
    let teacher: Vec<f32> = (0..INPUTS).map(|_| rng.uniform()).collect();
    let mut x = vec![0f32; SAMPLES * INPUTS];
    let mut y = vec![0f32; SAMPLES];
    for i in 0..SAMPLES {
        let mut dot = 0f32;
        for j in 0..INPUTS {
            x[i * INPUTS + j] = rng.uniform();
            dot += x[i * INPUTS + j] * teacher[j];
        }
        y[i] = (2.0 * dot).sin() + 0.5;
    }
    (x, y)
}

fn train(comm: &Comm) -> ddp::Result<bool> {
    let (rank, size) = (comm.rank(), comm.size());
    let (x, y) = make_data();

    // Different on every rank until the broadcast makes them rank 0's.
    let mut rng = Lcg(777 + rank as u64);
    let mut params = Params::zeros();
    for tensor in params.tensors() {
        tensor.iter_mut().for_each(|v| *v = 0.3 * rng.uniform());
    }
    comm.broadcast(&mut params.tensors(), 0)?;
    // Registered once: the same shapes as the parameters.
    let mut reducer = comm.reducer(&params.tensors(), Op::Avg)?;

    let mut sampler = Sampler::new(comm, SAMPLES)?.seed(2024);
    let (mut first_loss, mut loss) = (0.0, 0.0);
    for epoch in 0..EPOCHS {
        sampler.set_epoch(epoch);
        let mine: Vec<usize> = sampler.iter()?.collect();
        let mut epoch_loss = 0f64;
        for batch in mine.chunks(BATCH) {
            let step = reducer.step();
            let mut grads = step.gradients::<f32>()?;
            grads.iter_mut().for_each(|g| g.fill(0.0));
            for &i in batch {
                epoch_loss += f64::from(params.backprop(&x[i * INPUTS..(i + 1) * INPUTS], y[i], &mut grads));
            }
            // The backward pass finishes the last layer first: mark in that order.
            let scale = 1.0 / batch.len() as f32;
            while let Some(mut grad) = grads.pop() {
                grad.iter_mut().for_each(|g| *g *= scale);
                step.mark_ready(grad)?;
            }
            step.wait()?;
            for (t, p) in params.tensors().into_iter().enumerate() {
                p.iter_mut().zip(reducer.gradient::<f32>(t)?).for_each(|(p, g)| *p -= LEARNING_RATE * g);
            }
        }
        // The mean loss over every rank's samples.
        let mut mean = vec![epoch_loss / mine.len() as f64];
        comm.allreduce(&mut [&mut mean], Op::Avg)?;
        loss = mean[0];
        if epoch == 0 {
            first_loss = loss;
        }
        if rank == 0 {
            comm.log(LogLevel::Info, &format!("epoch {:2}  loss {loss:.5}", epoch + 1))?;
        }
    }

    let replicas = comm.check_replicas(&params.tensors())?;
    let converged = loss < first_loss / 5.0;
    if rank == 0 {
        let verdict = if converged { "converged" } else { "NOT converged" };
        let replicas = match &replicas {
            Replicas::Identical => "identical",
            Replicas::Differ(message) => message,
        };
        comm.log(
            LogLevel::Info,
            &format!("{verdict}: loss {first_loss:.5} -> {loss:.5} on {size} ranks; replicas {replicas}"),
        )?;
    }
    Ok(converged && replicas.is_identical())
}

/// Trains on `comm` and finalizes it.
fn train_and_finalize(comm: Comm) -> ddp::Result<bool> {
    let ok = train(&comm)?;
    comm.finalize()?;
    Ok(ok)
}

/// `n` ranks as threads of this process, each training on its own `Comm`.
fn train_local(n: usize) -> ddp::Result<bool> {
    let comms = Comm::init_local(n)?;
    std::thread::scope(|threads| {
        let ranks: Vec<_> = comms.into_iter().map(|comm| threads.spawn(|| train_and_finalize(comm))).collect();
        let results: Vec<ddp::Result<bool>> = ranks.into_iter().map(|rank| rank.join().unwrap()).collect();
        results.into_iter().try_fold(true, |all, ok| Ok(all && ok?))
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.as_slice() {
        [_] => Comm::init().and_then(train_and_finalize),
        [_, flag, n] if flag == "--local" => match n.parse() {
            Ok(n) => train_local(n),
            Err(_) => {
                eprintln!("train_mlp: --local N: N is a number of ranks, not {n:?}");
                std::process::exit(2);
            }
        },
        _ => {
            eprintln!("usage: train_mlp              (under mpirun: one rank per process)");
            eprintln!("       train_mlp --local N    (N ranks as threads of this process)");
            std::process::exit(2);
        }
    };
    match result {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(error) => {
            eprintln!("train_mlp: {error}");
            std::process::exit(2);
        }
    }
}
