# A small MLP trained data-parallel with DDP.jl: examples/c/train_mlp.c in Julia, with
# the same data, the same initial weights and the same float32 arithmetic, so it prints
# the same losses as the C example on the same number of ranks.
#
# Every rank builds the same synthetic regression set (y = sin(2 x . w*) + 0.5), takes
# its shard with shard_indices, computes gradients on its own mini-batches and averages
# them with one fused allreduce! per step, so all ranks take the same SGD step. Rank 0's
# initial weights are broadcast; at the end check_replicas confirms that every rank
# holds the same weights. From the repository root, with libddp built:
#
#     DDP_LIBRARY=build/src/libddp.so.0 mpirun -np 2 julia --project=bindings/julia examples/julia/train_mlp.jl
#
# With `--local N` it trains N replicas in this one process (under mpirun, N in each
# process, all ranks of one group), Conflux.jl's
# way: `DDP.replicate` the weights, each replica's backward pass on a task of its own
# (`DDP.withdevices`), and one grouped `allreduce!(:avg, replicas, grads...)` per step
# from this task; the same losses as N processes.
#
# Exits 0 when the loss fell below a fifth of its start and the replicas agree, 1 otherwise.
using DDP
using Printf

const INPUTS, HIDDEN, SAMPLES, BATCH, EPOCHS = 8, 32, 4096, 32, 30
const LEARNING_RATE = 0.2f0

"""The C example's linear congruential generator: the same numbers in every language."""
mutable struct LCG
    state::UInt64
end

"""The next number in [-1, 1), as the C example's `uniform()`."""
function uniform!(rng::LCG)
    rng.state = rng.state * 0x5851f42d4c957f2d + 0x14057b7ef767814f
    return Float32((rng.state >> 40) / Float64(1 << 24)) * 2.0f0 - 1.0f0
end

"""The data set, the same on every rank: inputs as columns of `x`, targets in `y`."""
function make_data()
    rng = LCG(12345)
    teacher = [uniform!(rng) for _ in 1:INPUTS]
    x = Matrix{Float32}(undef, INPUTS, SAMPLES)
    y = Vector{Float32}(undef, SAMPLES)
    for i in 1:SAMPLES
        dot = 0.0f0
        for j in 1:INPUTS
            x[j, i] = uniform!(rng)
            dot += x[j, i] * teacher[j]
        end
        y[i] = sin(2.0f0 * dot) + 0.5f0
    end
    return x, y
end

"""Weights in the C example's order and layout: `w1[j, k]` is its `w1[k * INPUTS + j]`."""
struct Params
    w1::Matrix{Float32}
    b1::Vector{Float32}
    w2::Vector{Float32}
    b2::Vector{Float32}
end

Params() = Params(zeros(Float32, INPUTS, HIDDEN), zeros(Float32, HIDDEN), zeros(Float32, HIDDEN),
                  zeros(Float32, 1))
arrays(p::Params) = (p.w1, p.b1, p.w2, p.b2)

"""Accumulates the gradient of one sample's squared error into `g`; returns that error."""
function backprop!(g::Params, p::Params, x::AbstractVector{Float32}, y::Float32)
    h = Vector{Float32}(undef, HIDDEN)
    out = p.b2[1]
    for k in 1:HIDDEN
        a = p.b1[k]
        for j in 1:INPUTS
            a += p.w1[j, k] * x[j]
        end
        h[k] = tanh(a)
        out += p.w2[k] * h[k]
    end
    err = out - y
    g.b2[1] += err
    for k in 1:HIDDEN
        g.w2[k] += err * h[k]
        da = err * p.w2[k] * (1 - h[k] * h[k])
        g.b1[k] += da
        for j in 1:INPUTS
            g.w1[j, k] += da * x[j]
        end
    end
    return err * err
end

function main()
    DDP.Init()
    rank, size = local_rank(), total_workers()
    x, y = make_data()

    # Different on every rank until the broadcast makes them rank 0's.
    params = initial_params(rank)
    bcast!(arrays(params), 0)
    grads = Params()

    first_loss = loss = 0.0
    for epoch in 0:EPOCHS-1
        mine = shard_indices(SAMPLES, rank, size; seed = 2024, epoch = epoch)
        epoch_loss = 0.0
        for start in 1:BATCH:length(mine)
            batch = mine[start:min(start + BATCH - 1, length(mine))]
            foreach(g -> fill!(g, 0.0f0), arrays(grads))
            for i in batch
                epoch_loss += backprop!(grads, params, view(x, :, i), y[i])
            end
            scale = 1.0f0 / Float32(length(batch))
            foreach(g -> g .*= scale, arrays(grads))
            allreduce!(arrays(grads), :avg)  # one call, small arrays fused
            for (p, g) in zip(arrays(params), arrays(grads))
                p .-= LEARNING_RATE .* g
            end
        end
        # The mean loss over every rank's samples.
        loss = allreduce!([epoch_loss / length(mine)], :avg)[1]
        epoch == 0 && (first_loss = loss)
        rank == 0 && ddp_println(@sprintf("epoch %2d  loss %.5f", epoch + 1, loss))
    end

    identical = check_replicas(arrays(params))
    converged = loss < first_loss / 5
    rank == 0 && ddp_println(@sprintf("%s: loss %.5f -> %.5f on %d ranks; replicas %s",
                                      converged ? "converged" : "NOT converged", first_loss, loss,
                                      size, identical ? "identical" : "differ"))
    DDP.Finalize()
    return converged && identical ? 0 : 1
end

"""The C example's starting weights (its rank 0's draw, which the broadcast gives every rank)."""
function initial_params(rank)
    params, rng = Params(), LCG(777 + rank)
    for a in arrays(params), i in eachindex(a)
        a[i] = 0.3f0 * uniform!(rng)
    end
    return params
end

"""`n` replicas in this process (`DDP.replicate`), reduced from this one task."""
function main_local(n)
    x, y = make_data()
    replicas = DDP.replicate(initial_params(0), n)  # every copy starts as rank 0's
    # Copy i is rank i - 1 of n; under mpirun, of every process's copies.
    ranks = [local_rank(DDP.communicator(replicas, i)) for i in 1:n]
    size = total_workers(DDP.communicator(replicas, 1))
    grads = [Params() for _ in 1:n]
    first_loss = loss = 0.0
    for epoch in 0:EPOCHS-1
        shards = [shard_indices(SAMPLES, ranks[i], size; seed = 2024, epoch = epoch) for i in 1:n]
        losses = zeros(n)
        for start in 1:BATCH:length(shards[1])  # every shard has the same length
            DDP.withdevices(replicas) do i, params
                mine = shards[i]
                batch = mine[start:min(start + BATCH - 1, length(mine))]
                foreach(g -> fill!(g, 0.0f0), arrays(grads[i]))
                for s in batch
                    losses[i] += backprop!(grads[i], params, view(x, :, s), y[s])
                end
                scale = 1.0f0 / Float32(length(batch))
                foreach(g -> g .*= scale, arrays(grads[i]))
            end
            allreduce!(:avg, replicas, map(arrays, grads)...)
            for i in 1:n, (p, g) in zip(arrays(replicas[i]), arrays(grads[i]))
                p .-= LEARNING_RATE .* g
            end
        end
        # The mean loss over every replica's samples, reduced as the processes do.
        means = [[losses[i] / length(shards[i])] for i in 1:n]
        loss = allreduce!(:avg, replicas, means...)[1][1]
        epoch == 0 && (first_loss = loss)
        ranks[1] == 0 && println(@sprintf("epoch %2d  loss %.5f", epoch + 1, loss))
    end
    identical = all(arrays(replicas[i]) == arrays(replicas[1]) for i in 2:n)
    converged = loss < first_loss / 5
    where = size == n ? "in one process" : "in each of $(size ÷ n) processes"
    ranks[1] == 0 && println(@sprintf("%s: loss %.5f -> %.5f on %d replicas %s; replicas %s",
                                      converged ? "converged" : "NOT converged", first_loss, loss, n, where,
                                      identical ? "identical" : "differ"))
    close(replicas)
    return converged && identical ? 0 : 1
end

exit(length(ARGS) == 2 && ARGS[1] == "--local" ? main_local(parse(Int, ARGS[2])) : main())
