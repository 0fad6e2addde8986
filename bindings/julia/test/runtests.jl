# The package against known values, on every rank. Run under MPI with 2 or more ranks
# (also correct on 1):
#     mpiexec -n 2 julia --project=/tmp/ddp-test bindings/julia/test/runtests.jl
# with /tmp/ddp-test made as bindings/julia/README.md says (Pkg.test("DDP") runs it on one process).
# Not executed in libddp's CI (no Julia runtime there); tests/python/test_julia_package.py
# checks this file statically, including that it uses every exported name.
using Test
using DDP
using DDP: LibDDP
using Functors, MLUtils, Optimisers

DDP.Init()
const rank = local_rank()
const n = total_workers()

"""Runs `f`, which must throw a DDPError with `status`; returns the error."""
function ddp_error(f, status)
    error = try
        f()
        nothing
    catch caught
        caught
    end
    @test error isa DDPError
    error isa DDPError && @test error.status == status
    return error
end

@testset "DDP on $n ranks, rank $rank" begin
    @testset "world" begin
        @test DDP.Initialized()
        @test 0 <= rank < n
        @test DDP.Init() === DDP.world()
        ranks = allreduce!([Int64(rank)], +)
        @test ranks[1] == n * (n - 1) ÷ 2
    end

    @testset "allreduce! with + * min max and :avg" begin
        v = fill(Float64(rank + 1), 4)
        @test allreduce!(v, +) === v
        @test v == fill(n * (n + 1) / 2, 4)
        @test allreduce!(fill(Float64(rank + 1), 3), *) == fill(Float64(factorial(n)), 3)
        @test allreduce!(fill(Int32(rank + 1), 3), min) == fill(Int32(1), 3)
        @test allreduce!(fill(Float16(rank + 1), 3), max) == fill(Float16(n), 3)
        @test allreduce!(fill(Float32(rank + 1), 5), :avg) == fill(Float32((n + 1) / 2), 5)
        @test allreduce!(fill(Float64(rank), 2)) == fill(Float64(n * (n - 1) / 2), 2)
        a, b = fill(Int8(1), 3), fill(UInt8(2), 70_000)
        allreduce!((a, b), +; fusion_bytes = -1)
        @test a == fill(Int8(n), 3) && b == fill(UInt8(2n), 70_000)
        matrix = fill(Float32(rank), 3, 4)
        allreduce!(view(matrix, :, 2:3), max; timeout_s = 60)
        @test matrix[:, 2:3] == fill(Float32(n - 1), 3, 2)
        @test matrix[:, [1, 4]] == fill(Float32(rank), 3, 2)
    end

    @testset "Iallreduce!" begin
        v = fill(Float64(rank + 1), 1000)
        w, request = Iallreduce!(v, +)
        @test w === v
        wait(request)
        @test DDP.isdone(request)
        @test v == fill(n * (n + 1) / 2, 1000)
        _, request = Iallreduce!((fill(Float32(rank), 2), fill(Float64(rank), 2)), :avg)
        @test wait(request) === nothing
    end

    @testset "bcast! and reduce!" begin
        root = n - 1
        v = fill(Float64(rank), 3)
        @test bcast!(v, root) == fill(Float64(root), 3)
        @test bcast!(fill(Int64(rank), 2)) == fill(Int64(0), 2)
        v = fill(Int64(rank + 1), 4)
        reduce!(v, +, root)
        @test v == (rank == root ? fill(Int64(n * (n + 1) ÷ 2), 4) : fill(Int64(rank + 1), 4))
        v = fill(Float32(rank + 1), 2)
        reduce!(v, max)
        @test v == (rank == 0 ? fill(Float32(n), 2) : fill(Float32(rank + 1), 2))
    end

    @testset "timeline and dump_flight_recorder" begin
        folder = mktempdir()
        result = timeline(joinpath(folder, "trace.json")) do
            allreduce!(ones(4), +)
            :done
        end
        @test result === :done
        @test occursin("\"name\":\"allreduce\"", read(joinpath(folder, "trace.rank$rank.json"), String))
        @test dump_flight_recorder(joinpath(folder, "fr.%r.json")) === nothing
        @test occursin("\"kind\":\"allreduce\"", read(joinpath(folder, "fr.$rank.json"), String))
        ddp_error(() -> timeline(() -> nothing, "/nonexistent-folder/t.json"), LibDDP.DDP_ERR_INVALID_ARGUMENT)
    end

    @testset "barrier and check_replicas" begin
        @test barrier() === nothing
        @test check_replicas((w = ones(3), b = (zeros(Float32, 2),)))
        @test check_replicas((w = fill(Float64(rank), 3),)) == (n == 1)
    end

    @testset "synchronize! over Lux-style trees and Optimisers state" begin
        ps = (layer_1 = (weight = fill(Float32(rank), 2, 3), bias = fill(Float32(rank), 2)),
              layer_2 = (scale = [Float64(rank)], steps = rank, training = Val(true)),
              tags = (:dense, nothing), lr = 0.1 * (rank + 1))
        root = n - 1
        synced = synchronize!(ps; root_rank = root)
        @test synced.layer_1.weight === ps.layer_1.weight
        @test ps.layer_1.weight == fill(Float32(root), 2, 3)
        @test ps.layer_1.bias == fill(Float32(root), 2)
        @test synced.layer_2.scale == [Float64(root)]
        @test synced.layer_2.steps === root
        @test synced.lr ≈ 0.1 * (root + 1)
        @test synced.tags === (:dense, nothing)
        @test check_replicas(ps)

        state = Optimisers.setup(Optimisers.Adam(0.01), (w = fill(Float32(rank), 4),))
        state.w.state[1] .= rank
        synced_state = synchronize!(state)
        @test synced_state.w.state[1] == zeros(Float32, 4)
        @test synced_state.w.rule.eta == 0.01

        uneven = (w = zeros(rank == 0 ? 3 : 4),)
        n > 1 && ddp_error(() -> synchronize!(uneven), LibDDP.DDP_ERR_MISMATCH)
    end

    @testset "allreduce_gradients averages" begin
        gs = (w = fill(Float32(rank + 1), 3), inner = (b = fill(Float64(rank), 2), c = nothing),
              s = Float64(rank))
        averaged = allreduce_gradients(gs)
        @test gs.w == fill(Float32((n + 1) / 2), 3)
        @test gs.inner.b == fill((n - 1) / 2, 2)
        @test averaged.s ≈ (n - 1) / 2
        @test averaged.inner.c === nothing
    end

    @testset "DistributedOptimizer" begin
        x = (w = ones(Float64, 2),)
        state = Optimisers.setup(DistributedOptimizer(Optimisers.Descent(0.5)), x)
        state, x = Optimisers.update!(state, x, (w = fill(Float64(rank + 1), 2),))
        @test x.w ≈ fill(1 - 0.5 * (n + 1) / 2, 2)
        @test_throws ArgumentError DistributedOptimizer(0.1)
    end

    @testset "shard_indices: ddp.h's test vectors, 1-based" begin
        @test shard_indices(10, 0, 3; seed = 42) == [0, 8, 7, 3] .+ 1
        @test shard_indices(10, 1, 3; seed = 42) == [9, 6, 2, 0] .+ 1
        @test shard_indices(10, 1, 3; seed = 42, strategy = :contiguous) == [6, 4, 7, 2] .+ 1
        @test shard_indices(10, 2, 3; seed = 42, drop_last = true) == [5, 4, 1] .+ 1
        @test shard_indices(10, 1, 3; shuffle = false) == [1, 4, 7, 0] .+ 1
        @test shard_indices(0, 0, 3) == Int[]
        ddp_error(() -> shard_indices(10, 3, 3), LibDDP.DDP_ERR_INVALID_ARGUMENT)
        ddp_error(() -> shard_indices(-1, 0, 3), LibDDP.DDP_ERR_INVALID_ARGUMENT)
        @test_throws ArgumentError shard_indices(10, 0, 3; strategy = :random)
    end

    @testset "DistributedDataContainer" begin
        data = collect(101:110)
        container = DistributedDataContainer(data)
        per_rank = cld(10, n)
        expected = [data[mod(rank * per_rank + k, 10) + 1] for k in 0:per_rank-1]
        @test numobs(container) == length(container) == per_rank
        @test [getobs(container, i) for i in 1:per_rank] == expected
        @test getobs(container, 1:per_rank) == expected
        counts = allreduce!([Int64(numobs(container))], max)
        @test counts[1] == per_rank
        pairs = DistributedDataContainer((collect(1:10), collect(11:20)))
        @test getobs(pairs, 1) == (expected[1] - 100, expected[1] - 90)
        images = reshape(Float32.(1:20), 2, 10)
        shard = DistributedDataContainer(images; shuffle = true, seed = 7)
        indices = shard_indices(10, rank, n; shuffle = true, seed = 7, strategy = :contiguous)
        @test [getobs(shard, i) for i in 1:numobs(shard)] == [images[:, j] for j in indices]
    end

    @testset "ddp_println and ddp_print" begin
        @test ddp_println("ddp_println from rank ", rank) === nothing
        @test ddp_print("ddp_print from rank ", rank) === nothing
    end

    @testset "errors carry libddp's status and message" begin
        error = ddp_error(() -> allreduce!(fill(Int32(1), 2), :avg), LibDDP.DDP_ERR_INVALID_ARGUMENT)
        @test occursin("DDP_ERR_INVALID_ARGUMENT", sprint(showerror, error))
        @test !isempty(error.message)
        ddp_error(() -> bcast!(zeros(2), n), LibDDP.DDP_ERR_INVALID_ARGUMENT)
        n > 1 && ddp_error(() -> allreduce!(zeros(rank + 1), +), LibDDP.DDP_ERR_MISMATCH)
        n > 1 && ddp_error(() -> allreduce!(zeros(2), rank == 0 ? min : max), LibDDP.DDP_ERR_MISMATCH)
        @test_throws ArgumentError allreduce!(zeros(2), -)
        @test_throws ArgumentError allreduce!(view(zeros(4, 4), 1, :), +)
        @test_throws ArgumentError allreduce!(fill(big(1), 2), +)
    end

    @testset "set_libddp_path! writes the preference the lookup reads first" begin
        if rank == 0
            path = LibDDP.libddp_path()
            @test DDP.set_libddp_path!(path) == path
            @test LibDDP.Preferences.load_preference(DDP, "libddp_path") == path
            @test DDP.set_libddp_path!(nothing) === nothing
            @test LibDDP.Preferences.load_preference(DDP, "libddp_path") === nothing
        end
    end

    @testset "Finalize" begin
        DDP.Finalize()
        @test !DDP.Initialized()
        ddp_error(() -> allreduce!(zeros(2), +), LibDDP.DDP_ERR_NOT_INITIALIZED)
        @test DDP.Finalize() === nothing
    end
end
