# Several ranks in one process (DDP.replicate, Conflux.jl's way), without a launcher:
# scripts/run-julia-tests runs it outside mpirun, with a thread per replica:
#     DDP_LIBRARY=build/src/libddp.so.0 JULIA_NUM_THREADS=3 julia --project=bindings/julia bindings/julia/test/local_group.jl
# With DDP_TEST_RESULTS=FILE it writes one libtest line per test set to FILE.
using Test
using DDP
using DDP: LibDDP

include("outcomes.jl")

"""The error `f()` throws (`nothing` if none)."""
function thrown(f)
    try
        f()
        return nothing
    catch error
        return error
    end
end

"""A model as Conflux's users keep one: a tree of arrays."""
model() = (layer1 = (weight = zeros(Float32, 4, 3), bias = zeros(Float32, 4)), layer2 = zeros(Float64, 2))

const TOP = Test.DefaultTestSet("DDP local groups, $(Threads.nthreads()) threads")
Test.push_testset(TOP)

testset("replicate gives each rank a copy of its own") do
    r = DDP.replicate(model(), 3)
    @test length(r) == 3
    @test [DDP.local_rank(DDP.communicator(r, i)) for i in 1:3] == [0, 1, 2]
    @test all(DDP.total_workers(DDP.communicator(r, i)) == 3 for i in 1:3)
    r[1].layer1.weight .= 1
    @test all(r[2].layer1.weight .== 0)  # deep copies
    close(r)
    @test !isopen(r)
    @test close(r) === nothing
end

testset("allreduce! from one task reduces every replica's gradients") do
    for n in (1, 2, 3, 4)
        r = DDP.replicate(model(), n)
        grads = [map(x -> fill!(similar(x), i), r[i].layer1) for i in 1:n]
        steps = [fill(10 * i, 3) for i in 1:n]
        allreduce!(:avg, r, grads...)
        allreduce!(+, r, steps...)
        mean = sum(1:n) / n
        @test all(all(g.weight .== Float32(mean)) && all(g.bias .== Float32(mean)) for g in grads)
        @test all(s == fill(10 * sum(1:n), 3) for s in steps)
        close(r)
    end
end

testset("synchronize! copies one replica into the others") do
    r = DDP.replicate(model(), 3)
    r[2].layer1.weight .= 7
    r[2].layer2 .= -1
    @test synchronize!(r; root = 2) === r
    @test all(all(r[i].layer1.weight .== 7) && all(r[i].layer2 .== -1) for i in 1:3)
    @test thrown(() -> synchronize!(r; root = 4)) isa ArgumentError
    close(r)
end

testset("withdevices computes on a task per replica, then one task reduces") do
    r = DDP.replicate(model(), 3)
    results = DDP.withdevices(r) do i, m
        m.layer2 .= i
        (i, Threads.threadid())
    end
    @test first.(results) == [1, 2, 3]
    allreduce!(+, r, (m.layer2 for m in r)...)
    @test all(all(m.layer2 .== 6) for m in r)
    error = thrown(() -> DDP.withdevices((i, m) -> i == 2 ? throw(ArgumentError("replica 2 failed")) : i, r))
    @test error isa TaskFailedException || error isa ArgumentError
    close(r)
end

testset("a replica passing another list fails every rank naming it") do
    r = DDP.replicate(model(), 3)
    grads = [zeros(Float32, 5), zeros(Float32, 6), zeros(Float32, 5)]
    error = thrown(() -> allreduce!(+, r, grads...))
    @test error isa DDPError && error.status == LibDDP.DDP_ERR_MISMATCH
    @test error isa DDPError && occursin("rank", error.message)
    close(r)
end

testset("bad arguments are refused naming them") do
    error = thrown(() -> DDP.replicate(model(), 0))
    @test error isa DDPError && error.status == LibDDP.DDP_ERR_INVALID_ARGUMENT
    @test error isa DDPError && occursin("n is 0", error.message)
    @test thrown(() -> DDP.replicate(model(), true)) isa ArgumentError
    @test thrown(() -> DDP.replicate(model(), 2; timeout_s = "soon")) isa ArgumentError
    error = thrown(() -> DDP.replicate(model(), [0, 1]))
    @test error isa DDPError && error.status == LibDDP.DDP_ERR_UNSUPPORTED
    @test error isa DDPError && occursin("not built yet in Julia", error.message)
    r = DDP.replicate(model(), 2; timeout_s = 60)
    @test thrown(() -> allreduce!(+, r, zeros(2))) isa ArgumentError
    # One replica's array refused (not contiguous): it throws naming the replica, its
    # peer's call fails at once naming the rank, and the group stays usable.
    started = time()
    error = thrown(() -> allreduce!(+, r, zeros(2), view(zeros(4), 1:2:4)))
    @test error isa ArgumentError && occursin("replica 2", error.msg) && occursin("not contiguous", error.msg)
    @test time() - started < 30
    @test sum(allreduce!(+, r, ones(2), ones(2))[1]) == 4
    # A bad op refuses every replica's call, with the package's message.
    error = thrown(() -> allreduce!(:median, r, zeros(2), zeros(2)))
    @test error isa ArgumentError && occursin("op :median", error.msg)
    @test sum(allreduce!(+, r, ones(2), ones(2))[1]) == 4
    close(r)
end

Test.pop_testset()
write_outcomes()
Test.finish(TOP)
