# The package against known values, on every rank: the core with Test alone, then each
# extension's tests where its package loads (the first lines printed say which ran).
# From the repository root, on 1, 2 or 3 ranks (scripts/run-julia-tests runs all three):
#     DDP_LIBRARY=build/src/libddp.so.0 mpirun -np 2 julia --project=bindings/julia bindings/julia/test/runtests.jl
# With DDP_TEST_RESULTS=FILE each rank also writes one libtest line per test set to FILE
# (`test NAME ... ok|FAILED|ignored`), which scripts/summarize-tests.py counts.
using Test
using Libdl
using DDP
using DDP: LibDDP

"""The packages whose extensions have tests here, in the order they are loaded."""
const EXTENSIONS = [:Functors, :Optimisers, :MLUtils, :MPI, :CUDA]

"""
    loadable(name)

Loads package `name` into Main when this environment has it; whether it loaded. On a
Julia without package extensions (before 1.9) nothing is loaded: there is nothing to test.
"""
function loadable(name::Symbol)
    isdefined(Base, :get_extension) || return false
    Base.find_package(string(name)) === nothing && return false
    try
        Core.eval(Main, Expr(:using, Expr(:., name)))
        return true
    catch error
        @warn "$name is installed but does not load; its extension's tests are skipped" error
        return false
    end
end

const LOADED = Dict(name => loadable(name) for name in EXTENSIONS)

# MPI.jl must use the system MPI, as libddp does: two MPIs in one process do not work.
if LOADED[:MPI] && !(isdefined(MPI, :MPIPreferences) && MPI.MPIPreferences.binary == "system")
    @warn "MPI.jl does not use the system MPI (MPIPreferences.use_system_binary()); its extension's tests are skipped"
    LOADED[:MPI] = false
end

"""A struct in a parameter tree: walked through Functors.jl (declared a functor where
Functors.jl does not treat every struct as one)."""
struct Layer
    w::Vector{Float32}
end

if LOADED[:Functors] && isempty(Functors.children(Layer(Float32[])))
    Core.eval(Main, :(Functors.@functor Layer))
end

if LOADED[:MPI]
    MPI.Init(threadlevel = :multiple)
    DDP.Init(MPI.COMM_WORLD)
else
    DDP.Init()
end
const rank = local_rank()
const n = total_workers()

if rank == 0
    tested = [String(name) for name in EXTENSIONS if LOADED[name]]
    skipped = [String(name) for name in EXTENSIONS if !LOADED[name]]
    println("DDP.jl on Julia $VERSION, $n rank(s): core tests with Test; extension tests for ",
            isempty(tested) ? "none" : join(tested, ", "), "; skipped (package not loadable here): ",
            isempty(skipped) ? "none" : join(skipped, ", "))
end

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

"""Output and exit code of a fresh `julia` in `project` that loads DDP and prints
`expression`, with `env` replacing the variables named (a value `nothing` removes one)."""
function in_fresh_julia(expression::AbstractString, env::Dict; project = dirname(@__DIR__))
    environment = Dict(k => v for (k, v) in ENV if !haskey(env, k))
    for (k, v) in env
        v === nothing || (environment[k] = v)
    end
    script = "using DDP; try print($expression); catch e; print(sprint(showerror, e)); exit(3); end"
    command = setenv(`$(Base.julia_cmd()) --startup-file=no --project=$project -e $script`, environment)
    output = IOBuffer()
    process = run(pipeline(ignorestatus(command); stdout = output, stderr = output))
    return String(take!(output)), process.exitcode
end

"""Starts an allreduce on `v` and drops the request, leaving it to the finalizer."""
@noinline start_and_drop(v) = (Iallreduce!(v, +); nothing)

include("outcomes.jl")

const TOP = Test.DefaultTestSet("DDP on $n ranks, rank $rank")
Test.push_testset(TOP)

testset("world") do
    @test DDP.Initialized()
    @test 0 <= rank < n
    @test DDP.Init() === DDP.world()
    ranks = allreduce!([Int64(rank)], +)
    @test ranks[1] == n * (n - 1) ÷ 2
end

testset("timeline and dump_flight_recorder") do
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

testset("timeline names each array of a tree by its path") do
    folder = mktempdir()
    timeline(joinpath(folder, "trace.json")) do
        allreduce_gradients((layer_1 = (weight = ones(3, 2), bias = ones(2)),))
        synchronize!((state = (ones(2), ones(3)), step = 1))
        allreduce!([ones(2), ones(3)])
        allreduce!((w = ones(2), b = ones(1)))
    end
    trace = read(joinpath(folder, "trace.rank$rank.json"), String)
    @test occursin("\"names\":[\"layer_1.weight\",\"layer_1.bias\"]", trace)
    @test occursin("\"names\":[\"state.1\",\"state.2\"]", trace)
    @test occursin("\"names\":[\"1\",\"2\"]", trace)
    @test occursin("\"names\":[\"w\",\"b\"]", trace)
    # Once the timeline stops, calls build no names (and a NamedTuple still reduces).
    @test DDP.TIMELINE_RECORDING[] == false
    @test DDP.leaf_names((w = ones(2),), [ones(2)]) === nothing
    @test allreduce!((w = fill(1.0, 2),)).w == fill(Float64(n), 2)
end

testset("node-local rank and size, the rank's device") do
    # mpirun starts every rank on this one machine.
    @test DDP.node_local_rank() == rank
    @test DDP.node_local_size() == n
    @test DDP.device() isa Int && DDP.device() >= -1
    ispath("/dev/nvidia0") || @test DDP.device() == -1
end

testset("allreduce! with + * min max and :avg") do
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

testset("BFloat16") do
    @test sizeof(DDP.BFloat16) == 2
    @test Float32(DDP.BFloat16(3.140625f0)) == 3.140625f0           # exact in bfloat16
    @test Float32(DDP.BFloat16(1.0f0 + 2.0f0^-8)) == 1.0f0           # a tie rounds to even
    @test Float32(DDP.BFloat16(1.0f0 + 3 * 2.0f0^-8)) == 1.0f0 + 2.0f0^-6
    @test isnan(DDP.BFloat16(NaN32))
    v = fill(DDP.BFloat16(rank + 1), 5)
    @test allreduce!(v, +) === v
    @test v == fill(DDP.BFloat16(n * (n + 1) ÷ 2), 5)
    @test allreduce!(fill(DDP.BFloat16(rank + 1), 3), max) == fill(DDP.BFloat16(n), 3)
    @test allreduce!(fill(DDP.BFloat16(2 * (rank + 1)), 2), :avg) == fill(DDP.BFloat16(n + 1), 2)
    bits = fill(reinterpret(UInt16, DDP.BFloat16(rank)), 4)  # another package's bfloat16 array
    allreduce!(reinterpret(DDP.BFloat16, bits), +)
    @test reinterpret(DDP.BFloat16, bits) == fill(DDP.BFloat16(n * (n - 1) ÷ 2), 4)
    if isdefined(Core, :BFloat16)
        core = reinterpret(getfield(Core, :BFloat16), fill(reinterpret(UInt16, DDP.BFloat16(1)), 3))
        @test reinterpret(DDP.BFloat16, copy(allreduce!(collect(core), +))) == fill(DDP.BFloat16(n), 3)
    end
end

testset("Iallreduce!") do
    v = fill(Float64(rank + 1), 1000)
    w, request = Iallreduce!(v, +)
    @test w === v
    wait(request)
    @test DDP.isdone(request)
    @test v == fill(n * (n + 1) / 2, 1000)
    _, request = Iallreduce!((fill(Float32(rank), 2), fill(Float64(rank), 2)), :avg)
    @test wait(request) === nothing
end

testset("a dropped Request's finalizer never waits for its peers") do
    # Rank 0 drops a request and collects it while its peers have not started theirs:
    # a finalizer that waited (ddp_request_free) would hold rank 0 until the timeout,
    # and its peers would find no flag file.
    if n > 1
        token = bcast!([rand(Int64)], 0)[1]
        flag = joinpath(tempdir(), "ddp-jl-finalizer-$(abs(token))")
        if rank == 0
            start_and_drop(ones(4))
            GC.gc()
            GC.gc()
            touch(flag)
            @test barrier(; timeout_s = 120) === nothing
            rm(flag; force = true)
        else
            deadline = time() + 120
            while !isfile(flag) && time() < deadline
                sleep(0.05)
            end
            @test isfile(flag)
            _, request = Iallreduce!(ones(4), +)
            wait(request)
            @test barrier(; timeout_s = 120) === nothing
        end
        GC.gc()  # frees rank 0's request, complete by now
        @test allreduce!([1.0], +) == [Float64(n)]
    end
end

testset("bcast! and reduce!") do
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

testset("allgather! and reduce_scatter! along the last dimension") do
    block(r, T = Float64) = T.(reshape(100r .+ (1:6), 2, 3))  # rank r's 2×3 block
    out = zeros(2, 3n)
    @test allgather!(out, block(rank)) === out
    @test out == hcat((block(r) for r in 0:n-1)...)
    @test allgather(fill(Int32(rank), 4)) == vcat((fill(Int32(r), 4) for r in 0:n-1)...)
    @test allgather(Float16[rank]) == Float16.(0:n-1)
    gathered = allgather((w = block(rank, Float32), b = fill(UInt8(rank), 5)); fusion_bytes = 64)
    @test gathered.w == hcat((block(r, Float32) for r in 0:n-1)...)
    @test gathered.b == vcat((fill(UInt8(r), 5) for r in 0:n-1)...)

    columns = Float64.(reshape(1:6n, 2, 3n))
    share = zeros(2, 3)
    @test reduce_scatter!(share, columns .* (rank + 1)) === share
    @test share == columns[:, 3rank+1:3rank+3] .* (n * (n + 1) ÷ 2)
    @test reduce_scatter(fill(Float32(rank + 1), 2n), max) == fill(Float32(n), 2)
    @test reduce_scatter(fill(Float16(rank + 1), n)) == [Float16(n * (n + 1) ÷ 2)]
    @test reduce_scatter(fill(DDP.BFloat16(2 * (rank + 1)), n), :avg; timeout_s = 60) == [DDP.BFloat16(n + 1)]

    # ZeRO's step: reduce_scatter then allgather is an allreduce (integer values: exact).
    grads = [Float64.(rand(-5:5, 4, 2n)), Float64.(rand(-5:5, 6n))]
    shards = reduce_scatter(grads)
    @test shards isa Vector && size(shards[1]) == (4, 2) && size(shards[2]) == (6,)
    @test allgather(shards) == allreduce!(deepcopy(grads), +)
    mixed = (steps = rand(Int64(-5):Int64(5), 3n), w = Float32.(rand(-5:5, 2, n)))
    @test allgather(reduce_scatter(mixed, +; fusion_bytes = 16)) == allreduce!(map(copy, mixed), +)
end

testset("allgather! and reduce_scatter! refuse sizes that do not fit, naming the array") do
    bad = n - 1  # the one rank with a wrong output; peers fail at once, naming it
    out = zeros(2, rank == bad ? 3n + 1 : 3n)
    started = time()
    own = ddp_error(() -> allgather!(out, ones(2, 3); timeout_s = 60),
                    rank == bad ? LibDDP.DDP_ERR_INVALID_ARGUMENT : LibDDP.DDP_ERR_MISMATCH)
    @test occursin("rank $bad", own.message)
    @test occursin("out has size (2, $(3n + 1)), not the (2, $(3n))", own.message)
    @test time() - started < 10
    if n > 1  # on one rank every length is a multiple of 1
        # A count that is a multiple of n, but not the last dimension: refused here, not by libddp.
        uneven = ddp_error(() -> reduce_scatter((ones(n), ones(n, n + 1))), LibDDP.DDP_ERR_INVALID_ARGUMENT)
        @test occursin("v[2]: its last dimension ($(n + 1)) is not a multiple of the $n ranks", uneven.message)
        named = ddp_error(() -> reduce_scatter!((w = zeros(1),), (w = ones(n + 1),)), LibDDP.DDP_ERR_INVALID_ARGUMENT)
        @test occursin("v.w: its last dimension", named.message)
    end
    pairs = ddp_error(() -> allgather!((zeros(n),), (ones(1), ones(1))), LibDDP.DDP_ERR_INVALID_ARGUMENT)
    @test occursin("2 input arrays for 1 output arrays", pairs.message)
    dtype = ddp_error(() -> reduce_scatter!(zeros(Float32, 1), ones(n)), LibDDP.DDP_ERR_INVALID_ARGUMENT)
    @test occursin("outputs[0]", dtype.message)  # libddp's own check
    @test allreduce!([1], +) == [n]
end

testset("alltoall! and alltoall: block j of every rank's array to rank j") do
    piece(r, j, T) = T.(10r .+ 3j .+ (1:2))  # what rank r sends rank j: every dtype holds it
    sent(r, T = Float64) = hcat((piece(r, j, T) for j in 0:n-1)...)  # column j+1 goes to rank j
    received(T = Float64) = hcat((piece(r, rank, T) for r in 0:n-1)...)
    long(r, T) = T.(r .+ (1:1000n) .% 7)  # 8000n bytes as Float64: alone, unfused
    long_received(T) = vcat((long(r, T)[1000rank+1:1000rank+1000] for r in 0:n-1)...)
    out = zeros(2, n)
    @test alltoall!(out, sent(rank)) === out
    @test out == received()
    for T in (Int8, Int32, Int64, UInt8, Float16, Float32, Float64, DDP.BFloat16),
            fusion_bytes in (nothing, -1)
        v = (w = sent(rank, T), long = long(rank, T), empty = T[])
        exchanged = alltoall(v; fusion_bytes = fusion_bytes, timeout_s = 60)
        @test exchanged isa NamedTuple && eltype(exchanged.w) == T && size(exchanged.w) == (2, n)
        @test exchanged.w == received(T) && exchanged.long == long_received(T) && isempty(exchanged.empty)
        @test v.w == sent(rank, T)  # v is only read
    end
    # Exchanging twice gives the input back, in a Vector and alone.
    tokens = [Float32.(rand(-5:5, 3, 2n)), Int64.(rand(-5:5, 4n))]
    @test alltoall(alltoall(tokens; fusion_bytes = 16)) == tokens
    @test alltoall(alltoall(tokens[1])) == tokens[1]
end

testset("alltoall! refuses, on one rank, what does not fit: every rank at once") do
    bad = n - 1
    good(f) = rank == bad ? f() : alltoall!(zeros(2n), ones(2n); timeout_s = 60)
    for (call, words) in ((() -> good(() -> alltoall!(zeros(2n + 1), ones(2n + 1); timeout_s = 60)),
                           "count is $(2n + 1), not a multiple of the $n ranks alltoall sends its blocks to"),
                          (() -> good(() -> alltoall!(zeros(2n + 1), ones(2n); timeout_s = 60)),
                           "out has size ($(2n + 1),), not the ($(2n),) that v of size ($(2n),) needs"),
                          (() -> good(() -> alltoall!(zeros(Float32, 2n), ones(2n); timeout_s = 60)),
                           "outputs[0].dtype is f32 but inputs[0].dtype is f64"))
        n == 1 && occursin("not a multiple", words) && continue  # every length is a multiple of 1
        started = time()
        error = ddp_error(call, rank == bad ? LibDDP.DDP_ERR_INVALID_ARGUMENT : LibDDP.DDP_ERR_MISMATCH)
        @test time() - started < 10  # the world's timeout is 1800 s: nobody waited
        @test occursin(words, error.message)
        @test occursin(rank == bad ? "" : "rank $bad passed invalid arguments to alltoall", error.message)
        @test allreduce!([1], +) == [n]  # every rank in step again
    end
end

testset("barrier and check_replicas") do
    @test barrier() === nothing
    @test check_replicas((w = ones(3), b = (zeros(Float32, 2),)))
    @test check_replicas((w = fill(Float64(rank), 3),)) == (n == 1)
end

testset("synchronize! over Lux-style trees") do
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
    uneven = (w = zeros(rank == 0 ? 3 : 4),)
    n > 1 && ddp_error(() -> synchronize!(uneven), LibDDP.DDP_ERR_MISMATCH)
    if !LOADED[:Functors]
        @test_throws ArgumentError synchronize!((cell = Ref(1.0),))  # a struct needs Functors
    end
end

testset("allreduce_gradients averages") do
    gs = (w = fill(Float32(rank + 1), 3), inner = (b = fill(Float64(rank), 2), c = nothing),
          s = Float64(rank))
    averaged = allreduce_gradients(gs)
    @test gs.w == fill(Float32((n + 1) / 2), 3)
    @test gs.inner.b == fill((n - 1) / 2, 2)
    @test averaged.s ≈ (n - 1) / 2
    @test averaged.inner.c === nothing
end

testset("DistributedOptimizer needs an Optimisers.jl rule") do
    @test_throws ArgumentError DistributedOptimizer(0.1)
end

testset("shard_indices: ddp.h's test vectors, 1-based") do
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

testset("DistributedDataContainer") do
    data = collect(101:110)
    container = DistributedDataContainer(data)
    per_rank = cld(10, n)
    expected = [data[mod(rank * per_rank + k, 10) + 1] for k in 0:per_rank-1]
    @test length(container) == per_rank
    @test [container[i] for i in 1:per_rank] == expected
    counts = allreduce!([Int64(length(container))], max)
    @test counts[1] == per_rank
    pairs = DistributedDataContainer((collect(1:10), collect(11:20)))
    @test pairs[1] == (expected[1] - 100, expected[1] - 90)
    images = reshape(Float32.(1:20), 2, 10)
    shard = DistributedDataContainer(images; shuffle = true, seed = 7)
    indices = shard_indices(10, rank, n; shuffle = true, seed = 7, strategy = :contiguous)
    @test [shard[i] for i in 1:length(shard)] == [images[:, j] for j in indices]
end

testset("ddp_println and ddp_print") do
    @test ddp_println("ddp_println from rank ", rank) === nothing
    @test ddp_print("ddp_print from rank ", rank) === nothing
end

testset("errors carry libddp's status and message") do
    error = ddp_error(() -> allreduce!(fill(Int32(1), 2), :avg), LibDDP.DDP_ERR_INVALID_ARGUMENT)
    @test occursin("DDP_ERR_INVALID_ARGUMENT", sprint(showerror, error))
    @test !isempty(error.message)
    ddp_error(() -> bcast!(zeros(2), n), LibDDP.DDP_ERR_INVALID_ARGUMENT)
    n > 1 && ddp_error(() -> allreduce!(zeros(rank + 1), +), LibDDP.DDP_ERR_MISMATCH)
    # A mismatch names the array as the program does, and the error's type is the
    # package's public one (as Python's ddp.MismatchError and Rust's ddp::Error).
    if n > 1
        named = ddp_error(() -> allreduce!((w = zeros(2), b = zeros(rank == n - 1 ? 3 : 2)), +),
                          LibDDP.DDP_ERR_MISMATCH)
        @test occursin("tensor 1 (b) is f64[2] on cpu on rank 0 but f64[3] on cpu on rank $(n - 1)", named.message)
        @test parentmodule(typeof(named)) === DDP && nameof(typeof(named)) === :DDPError
        @test startswith(sprint(showerror, named), "DDPError(DDP_ERR_MISMATCH): allreduce mismatch: ")
    end
    n > 1 && ddp_error(() -> allreduce!(zeros(2), rank == 0 ? min : max), LibDDP.DDP_ERR_MISMATCH)
    # An op libddp has not is refused on every rank alike, telling the peers (a call
    # that every rank refuses: each throws its own).
    bad_op = ddp_error(() -> allreduce!(zeros(2), -), LibDDP.DDP_ERR_INVALID_ARGUMENT)
    @test occursin("rank $rank: op -: use +, *, min, max", bad_op.message)
    @test_throws ArgumentError allreduce!(view(zeros(4, 4), 1, :), +)
    @test_throws ArgumentError allreduce!(fill(big(1), 2), +)
end

testset("finding libddp: DDP_LIBRARY, the system, pkg-config's libdir") do
    # In fresh processes on rank 0: the lookup runs once per session.
    if rank == 0
        here = LibDDP.libddp_path()
        # Calls go through addresses looked up once in that library.
        local_rank()
        @test LibDDP.ADDRESSES.ddp_rank[] == Libdl.dlsym(Libdl.dlopen(here), :ddp_rank)
        missing_function = try
            LibDDP.function_pointer(Ref(C_NULL), :ddp_no_such_function)
            ""
        catch error
            sprint(showerror, error)
        end
        @test occursin("$here has no function ddp_no_such_function", missing_function)
        system = Libdl.dlopen("libddp.so.0"; throw_error = false) !== nothing
        missing_library = "/nonexistent/libddp.so.0"
        output, code = in_fresh_julia("DDP.LibDDP.libddp_path()", Dict("DDP_LIBRARY" => missing_library))
        @test code == 3
        @test occursin("cannot load \"$missing_library\", named by the environment variable DDP_LIBRARY", output)
        mktempdir() do pc_dir
            write(joinpath(pc_dir, "ddp.pc"), "libdir=$(dirname(here))\nName: ddp\nDescription: libddp\n" *
                                              "Version: 1\nLibs: -L\${libdir} -lddp\n")
            output, code = in_fresh_julia("DDP.LibDDP.libddp_path()", Dict(
                "DDP_LIBRARY" => nothing, "PKG_CONFIG_PATH" => nothing,
                "PKG_CONFIG_LIBDIR" => pc_dir))
            @test code == 0
            system || @test realpath(output) == realpath(here)
            output, code = in_fresh_julia("DDP.LibDDP.libddp_path()", Dict(
                "DDP_LIBRARY" => nothing, "PKG_CONFIG_PATH" => nothing,
                "PKG_CONFIG_LIBDIR" => joinpath(pc_dir, "empty")))
            system || @test code == 3 && occursin("pkg-config knows no package ddp", output)
        end
    end
end

testset("Init's hang_watchdog_s reaches libddp, which refuses a NaN; 0 is the default") do
    if rank == 0
        output, code = in_fresh_julia("DDP.Init(backend = :self, hang_watchdog_s = NaN)", Dict{String, Any}())
        @test code == 3
        @test occursin("hang_watchdog_s", output)
        output, code = in_fresh_julia("DDP.Init(backend = :self, hang_watchdog_s = -1) === DDP.world()",
                                      Dict{String, Any}())
        @test code == 0 && output == "true"
        # As in C, 0 is the default for both; a Bool or a String is no number of seconds.
        output, code = in_fresh_julia("join([map(kw -> try DDP.Init(; backend = :self, kw...) catch e; " *
                                      "sprint(showerror, e) end, ((timeout_s = true,), " *
                                      "(hang_watchdog_s = :sixty,)))..., " *
                                      "DDP.Init(backend = :self, timeout_s = 0, hang_watchdog_s = 0) === DDP.world()], " *
                                      "\" | \")", Dict{String, Any}())
        @test code == 0
        @test occursin("ArgumentError: timeout_s true: expected a number of seconds (0: DDP_TIMEOUT_S", output)
        @test occursin("ArgumentError: hang_watchdog_s :sixty: expected a number of seconds " *
                       "(0: DDP_HANG_WATCHDOG_S, else 60; negative: off)", output)
        @test endswith(output, " | true")
    end
end

testset("the libddp_path preference: read without Preferences.jl, DDP_LIBRARY wins") do
    if DDP.PREFERENCE_WRITER[] === nothing  # the Preferences extension is not loaded
        @test_throws ArgumentError DDP.set_libddp_path!("/opt/libddp/lib/libddp.so.0")
    end
    # Fresh processes on rank 0, in a copy of the package's project holding a
    # LocalPreferences.toml (Base reads preferences from Julia 1.6 on).
    if rank == 0 && isdefined(Base, :get_preferences)
        here = LibDDP.libddp_path()
        mktempdir() do project
            package = dirname(@__DIR__)
            cp(joinpath(package, "Project.toml"), joinpath(project, "Project.toml"))
            symlink(joinpath(package, "src"), joinpath(project, "src"))
            preferences = joinpath(project, "LocalPreferences.toml")
            run_in_project(env) = in_fresh_julia("DDP.LibDDP.libddp_path()", env; project = project)
            write(preferences, "[DDP]\nlibddp_path = \"/nonexistent/preferred/libddp.so.0\"\n")
            output, code = run_in_project(Dict("DDP_LIBRARY" => nothing))
            @test code == 3 && occursin("named by the libddp_path preference", output)
            write(preferences, "[DDP]\nlibddp_path = \"$here\"\n")
            output, code = run_in_project(Dict("DDP_LIBRARY" => nothing))
            @test code == 0 && realpath(output) == realpath(here)
            output, code = run_in_project(Dict("DDP_LIBRARY" => "/nonexistent/env/libddp.so.0"))
            @test code == 3 && occursin("named by the environment variable DDP_LIBRARY", output)
        end
    end
end

testset("Functors extension: structs in trees"; runs = LOADED[:Functors]) do
    @test Base.get_extension(DDP, :DDPFunctorsExt) !== nothing
    tree = (layer = Layer(fill(Float32(rank), 2)), steps = rank)
    synced = synchronize!(tree)
    @test tree.layer.w == zeros(Float32, 2)
    @test synced.layer isa Layer && synced.steps == 0
end

testset("Optimisers extension: state trees and DistributedOptimizer"; runs = LOADED[:Optimisers]) do
    @test Base.get_extension(DDP, :DDPOptimisersExt) !== nothing
    state = Optimisers.setup(Optimisers.Adam(0.01), (w = fill(Float32(rank), 4),))
    state.w.state[1] .= rank
    synced_state = synchronize!(state)
    @test synced_state.w.state[1] == zeros(Float32, 4)
    @test synced_state.w.rule.eta == 0.01
    x = (w = ones(Float64, 2),)
    opt_state = Optimisers.setup(DistributedOptimizer(Optimisers.Descent(0.5)), x)
    opt_state, x = Optimisers.update!(opt_state, x, (w = fill(Float64(rank + 1), 2),))
    @test x.w ≈ fill(1 - 0.5 * (n + 1) / 2, 2)
end

testset("MLUtils extension: numobs and getobs"; runs = LOADED[:MLUtils]) do
    @test Base.get_extension(DDP, :DDPMLUtilsExt) !== nothing
    data = collect(101:110)
    container = DistributedDataContainer(data)
    per_rank = cld(10, n)
    expected = [data[mod(rank * per_rank + k, 10) + 1] for k in 0:per_rank-1]
    @test MLUtils.numobs(container) == per_rank
    @test MLUtils.getobs(container, 1:per_rank) == expected
    @test length(collect(MLUtils.DataLoader(container; batchsize = 1))) == per_rank
end

testset("MPI extension: DDP.Init(MPI.COMM_WORLD)"; runs = LOADED[:MPI]) do
    @test Base.get_extension(DDP, :DDPMPIExt) !== nothing
    @test MPI.Comm_rank(MPI.COMM_WORLD) == rank
    @test MPI.Comm_size(MPI.COMM_WORLD) == n
end

testset("CUDA extension: the rank's GPU and CuArrays"; runs = LOADED[:CUDA] && CUDA.functional()) do
    @test Base.get_extension(DDP, :DDPCUDAExt) !== nothing
    @test CUDA.deviceid(CUDA.device()) == DDP.device()
    v = CUDA.fill(Float32(rank + 1), 4)
    allreduce!(v, +)
    @test Array(v) == fill(Float32(n * (n + 1) / 2), 4)
end

"""The world ranks sharing this rank's color under `color_of`, in world order."""
members(color_of) = [r for r in 0:n-1 if color_of(r) == color_of(rank)]

"""allreduce! of (world rank + 1) * scale on `comm`: whether it gave the sum over `ranks`."""
function sums_over(comm, ranks, scale = 1.0)
    v = allreduce!(fill((rank + 1) * scale, 300), +, comm)  # beyond what agreement carries
    return v == fill(sum((r + 1) * scale for r in ranks), 300)
end

testset("DDP.split: rows (rank ÷ 2) and columns (rank % 2), key order, every collective") do
    rows = DDP.split(DDP.world(), rank ÷ 2; key = rank)
    columns = DDP.split(DDP.world(), rank % 2; key = rank)
    @test rows isa DDP.Communicator && isopen(rows)
    @test (local_rank(rows), total_workers(rows)) == (rank % 2, length(members(r -> r ÷ 2)))
    @test (local_rank(columns), total_workers(columns)) == (rank ÷ 2, length(members(r -> r % 2)))
    for scale in (1.0, 10.0, 100.0)
        @test sums_over(rows, members(r -> r ÷ 2), scale)
        @test sums_over(columns, members(r -> r % 2), scale)
        @test sums_over(DDP.world(), 0:n-1, scale)
    end
    column, size = members(r -> r % 2), total_workers(columns)
    @test bcast!(fill(Float64(rank), 3), size - 1, columns) == fill(Float64(column[end]), 3)
    v = reduce!(fill(Int64(rank), 2), max, 0, columns)
    @test v == fill(Int64(local_rank(columns) == 0 ? column[end] : rank), 2)
    @test allgather(fill(Int32(rank), 2), columns) == Int32.(repeat(column; inner = 2))
    @test reduce_scatter(collect(1.0:2size), +, columns) ==
          size .* [2local_rank(columns) + 1.0, 2local_rank(columns) + 2.0]
    w, request = Iallreduce!(ones(5), +, columns)
    wait(request)
    @test w == fill(Float64(size), 5)
    @test barrier(columns) === nothing
    @test check_replicas((w = ones(3),), columns)
    ps = synchronize!((w = fill(Float64(rank), 2), step = rank); root_rank = 0, comm = columns)
    @test ps.step == column[1] && ps.w == fill(Float64(column[1]), 2)
    gs = allreduce_gradients((w = fill(Float32(rank), 3),); comm = columns)
    @test gs.w == fill(Float32(sum(column) / size), 3)
    close(columns)
    close(rows)
    @test !isopen(rows) && !isopen(columns)
    # key orders the ranks; equal keys keep the world's order (do-blocks close them).
    @test DDP.split(sub -> local_rank(sub), DDP.world(), 0; key = n - rank) == n - 1 - rank
    @test DDP.split(sub -> local_rank(sub), DDP.world(), 7; key = 3) == rank
end

testset("DDP.split with nothing joins none; DDP.split_node; a split of a sub outlives it") do
    sub = DDP.split(DDP.world(), rank == 0 ? nothing : 0; key = rank)
    if rank == 0
        @test sub === nothing
    else
        @test (local_rank(sub), total_workers(sub)) == (rank - 1, n - 1)
        @test sums_over(sub, 1:n-1)
        close(sub)
    end
    @test DDP.split(sub -> sub === nothing, DDP.world(), rank == 0 ? nothing : 1) == (rank == 0)
    # -1 is C's DDP_COLOR_UNDEFINED: the same as nothing, as in C
    @test DDP.split(sub -> sub === nothing, DDP.world(), rank == 0 ? -1 : 1) == (rank == 0)
    node = DDP.split_node(; timeout_s = 60)
    @test (local_rank(node), total_workers(node)) == (DDP.node_local_rank(), DDP.node_local_size())
    @test sums_over(node, 0:n-1)  # one machine: every rank
    rows = DDP.split(node, rank ÷ 2; key = rank)
    close(node)
    @test sums_over(rows, members(r -> r ÷ 2), 3.0)
    close(rows)
    @test DDP.split_node(total_workers) == n
end

testset("a closed sub-communicator throws; closing twice does nothing; the world is not closed") do
    sub = DDP.split(DDP.world(), 0)
    close(sub)
    @test close(sub) === nothing
    @test !isopen(sub) && isopen(DDP.world())
    error = ddp_error(() -> allreduce!(ones(2), +, sub), LibDDP.DDP_ERR_NOT_INITIALIZED)
    @test occursin("sub-communicator that was freed", error.message)
    ddp_error(() -> barrier(sub), LibDDP.DDP_ERR_NOT_INITIALIZED)
    ddp_error(() -> DDP.split(sub, 0), LibDDP.DDP_ERR_NOT_INITIALIZED)
    error = ddp_error(() -> close(DDP.world()), LibDDP.DDP_ERR_INVALID_ARGUMENT)
    @test occursin("DDP.Finalize()", error.message)
    # The do-block form closes also when its body throws.
    kept = Ref{Any}(nothing)
    @test_throws ArgumentError DDP.split(DDP.world(), 0) do sub
        kept[] = sub
        throw(ArgumentError("thrown inside"))
    end
    @test !isopen(kept[])
    @test sums_over(DDP.world(), 0:n-1)
end

testset("a bad color, key or timeout on one rank fails every peer at once") do
    bad = n - 1
    # A color's value is libddp's to check, as for C (its message); what an Int32
    # needs (an integer that fits) is the package's.
    for (call, words) in ((() -> DDP.split(DDP.world(), rank == bad ? -5 : 0),
                           "color is -5; it must be >= 0, or DDP_COLOR_UNDEFINED (-1) to join none"),
                          (() -> DDP.split(DDP.world(), rank == bad ? 1.5 : 0), "color 1.5"),
                          (() -> DDP.split(DDP.world(), rank == bad ? 2^31 : 0),
                           "color 2147483648: expected an integer ≥ 0 that fits in 32 bits"),
                          (() -> DDP.split(DDP.world(), 0; key = rank == bad ? 2^40 : 0), "key 1099511627776"),
                          # libddp's rule for every timeout, as for C: its message
                          (() -> DDP.split(DDP.world(), 0; timeout_s = rank == bad ? -1 : 60),
                           "opts->timeout_s must be a finite number >= 0 (0: the parent's)"),
                          (() -> DDP.split_node(; timeout_s = rank == bad ? NaN : 60),
                           "opts->timeout_s must be a finite number >= 0 (0: the parent's)"),
                          (() -> DDP.split(DDP.world(), 0; timeout_s = rank == bad ? "60" : 60),
                           "timeout_s \"60\": expected a number of seconds"),
                          (() -> DDP.split(DDP.world(), 0; timeout_s = rank == bad ? true : 60),
                           "timeout_s true: expected a number of seconds (nothing or 0: the parent's timeout)"))
        started = time()
        error = ddp_error(call, rank == bad ? LibDDP.DDP_ERR_INVALID_ARGUMENT : LibDDP.DDP_ERR_MISMATCH)
        @test time() - started < 30  # the world's timeout is 1800 s: nobody waited
        @test occursin(words, error.message)
        rank == bad || @test occursin("rank $bad passed invalid arguments to comm_split", error.message)
        @test sums_over(DDP.world(), 0:n-1)  # every rank in step again
    end
end

testset("a timeout of 0 means the default, as in C: the communicator's, the parent's") do
    @test allreduce!(ones(2), +; timeout_s = 0) == fill(Float64(n), 2)
    @test barrier(; timeout_s = 0.0) === nothing
    @test bcast!(fill(Float64(rank), 2), 0; timeout_s = 0) == zeros(2)
    _, request = Iallreduce!(ones(2); timeout_s = 0)
    @test wait(request) === nothing
    DDP.Reducer(zeros(Float32, 2); timeout_s = 0) do reducer
        g = DDP.gradients(reducer)
        g .= 1
        wait(DDP.mark_ready!(reducer, g))
        @test g == ones(Float32, 2)
    end
    @test DDP.split(sub -> sums_over(sub, 0:n-1), DDP.world(), 0; timeout_s = 0)
    @test DDP.split_node(node -> sums_over(node, 0:n-1); timeout_s = 0)
    # 0 is the parent's timeout, neither none nor never: rank 0, alone in a barrier on a
    # sub split with timeout 0 from a parent of 2 s, times out after those 2 s, and tells
    # the others, who join it only after the world's barrier that rank 0 joins then.
    if n > 1
        DDP.split(DDP.world(), 0; timeout_s = 2) do parent
            DDP.split(parent, 0; timeout_s = 0) do sub
                started = time()
                if rank == 0
                    error = ddp_error(() -> barrier(sub; timeout_s = 0), LibDDP.DDP_ERR_TIMEOUT)
                    @test 1.5 < time() - started < 10
                    @test occursin("timed out on rank 0", error.message)
                    barrier()
                else
                    barrier()
                    error = ddp_error(() -> barrier(sub; timeout_s = 0), LibDDP.DDP_ERR_TIMEOUT)
                    @test occursin("rank 0 gave up", error.message)
                end
            end
            @test sums_over(parent, 0:n-1)  # the parent is untouched
        end
    end
end

testset("a negative, NaN or infinite timeout on one rank: libddp's message, every rank at once") do
    bad = n - 1
    rule = "opts->timeout_s must be a finite number >= 0"
    for (call, collective) in ((() -> barrier(; timeout_s = rank == bad ? -1 : 60), "barrier"),
                               (() -> allreduce!(ones(2), +; timeout_s = rank == bad ? NaN : 60), "allreduce"),
                               (() -> bcast!(ones(2), 0; timeout_s = rank == bad ? Inf : 60), "broadcast"),
                               (() -> wait(Iallreduce!(ones(2); timeout_s = rank == bad ? -0.5 : 60)[2]), "allreduce"),
                               (() -> allgather(ones(2); timeout_s = rank == bad ? -Inf : 60), "allgather"),
                               (() -> DDP.Reducer(zeros(Float32, 2); timeout_s = rank == bad ? -1 : 60), "reducer_create"))
        started = time()
        error = ddp_error(call, rank == bad ? LibDDP.DDP_ERR_INVALID_ARGUMENT : LibDDP.DDP_ERR_MISMATCH)
        @test time() - started < 30  # the world's timeout is 1800 s: nobody waited
        @test occursin(rule, error.message)
        rank == bad || @test occursin("rank $bad passed invalid arguments to $collective", error.message)
        @test sums_over(DDP.world(), 0:n-1)  # every rank in step again
    end
end

testset("a bad op, root or option of the wrong kind on one rank fails every peer at once") do
    bad = n - 1
    no_number(what) = "timeout_s $what: expected a number of seconds (nothing or 0: the communicator's timeout)"
    for (call, collective, words) in (
            (() -> allreduce!(ones(2), rank == bad ? (-) : (+)), "allreduce", "op -: use +, *, min, max"),
            (() -> wait(Iallreduce!(ones(2), rank == bad ? :mean : :sum)[2]), "allreduce", "op :mean: use +"),
            (() -> reduce!(ones(2), rank == bad ? (/) : (+), 0), "reduce", "op /: use +"),
            (() -> reduce_scatter(ones(2n), rank == bad ? :mean : :sum), "reduce_scatter", "op :mean: use +"),
            (() -> allreduce!(ones(2), +; timeout_s = rank == bad ? "60" : 60), "allreduce", no_number("\"60\"")),
            (() -> wait(Iallreduce!(ones(2); timeout_s = rank == bad ? true : 60)[2]), "allreduce", no_number("true")),
            (() -> reduce!(ones(2), +, 0; timeout_s = rank == bad ? :never : 60), "reduce", no_number(":never")),
            (() -> reduce_scatter(ones(2n); timeout_s = rank == bad ? "60" : 60), "reduce_scatter", no_number("\"60\"")),
            (() -> allgather(ones(2); timeout_s = rank == bad ? false : 60), "allgather", no_number("false")),
            (() -> bcast!(ones(2), 0; timeout_s = rank == bad ? 1im : 60), "broadcast", no_number("0 + 1im")),
            (() -> barrier(; timeout_s = rank == bad ? true : 60), "barrier", no_number("true")),
            (() -> synchronize!((w = ones(2),); timeout_s = rank == bad ? "60" : 60), "sync_optimizer_state",
             no_number("\"60\"")),
            (() -> allreduce_gradients((w = ones(2),); timeout_s = rank == bad ? true : 60), "allreduce",
             no_number("true")),
            (() -> DDP.Reducer(zeros(Float32, 2); timeout_s = rank == bad ? "60" : 60), "reducer_create",
             no_number("\"60\"")),
            (() -> allreduce!(ones(2), +; fusion_bytes = rank == bad ? 1.5 : 1024), "allreduce",
             "fusion_bytes 1.5: expected an integer number of bytes"),
            (() -> bcast!(ones(2), rank == bad ? 2^40 : 0), "broadcast", "root 1099511627776: expected a rank"),
            (() -> bcast!(ones(2), rank == bad ? 1.5 : 0), "broadcast", "root 1.5: expected a rank"),
            (() -> reduce!(ones(2), +, rank == bad ? 0.0 : 0), "reduce", "root 0.0: expected a rank"),
            (() -> synchronize!((w = ones(2),); root_rank = rank == bad ? 1.0 : 0), "sync_optimizer_state",
             "root_rank 1.0: expected a rank"),
            (() -> synchronize!((w = ones(2),); root_rank = rank == bad ? true : 0), "sync_optimizer_state",
             "root_rank true: expected a rank"))
        started = time()
        error = ddp_error(call, rank == bad ? LibDDP.DDP_ERR_INVALID_ARGUMENT : LibDDP.DDP_ERR_MISMATCH)
        @test time() - started < 30  # the world's timeout is 1800 s: nobody waited
        @test occursin(words, error.message)
        @test occursin(rank == bad ? "rank $bad: " : "rank $bad passed invalid arguments to $collective",
                       error.message)
        @test sums_over(DDP.world(), 0:n-1)  # every rank in step again
    end
end

testset("an array libddp cannot take on one rank: ArgumentError there, every peer fails at once") do
    bad = n - 1
    for (make, words) in ((() -> view(collect(1.0:4n), 1:2:4n), "is not contiguous in memory"),
                          (() -> ones(Int16, 2n), "element type Int16 has no libddp dtype"))
        for (call, collective) in ((v -> allreduce!(v, +; timeout_s = 60), "allreduce"),
                                   (v -> wait(Iallreduce!(v; timeout_s = 60)[2]), "allreduce"),
                                   (v -> bcast!(v, 0; timeout_s = 60), "broadcast"),
                                   (v -> reduce!(v, +, 0; timeout_s = 60), "reduce"),
                                   (v -> allgather(v; timeout_s = 60), "allgather"),
                                   (v -> reduce_scatter(v; timeout_s = 60), "reduce_scatter"),
                                   (v -> alltoall(v; timeout_s = 60), "alltoall"),
                                   (v -> synchronize!((w = v,); timeout_s = 60), "sync_optimizer_state"))
            v = rank == bad ? make() : ones(2n)
            started = time()
            error = try
                call(v)
                nothing
            catch caught
                caught
            end
            @test time() - started < 30  # the world's timeout is 1800 s: nobody waited
            if rank == bad  # the exception the README promises, after telling the peers
                @test error isa ArgumentError && occursin(words, error.msg)
            else
                @test error isa DDPError && error.status == LibDDP.DDP_ERR_MISMATCH
                @test error isa DDPError && occursin("rank $bad passed invalid arguments to $collective",
                                                     error.message)
                @test error isa DDPError && occursin(words, error.message)
            end
            @test sums_over(DDP.world(), 0:n-1)  # every rank in step again
        end
    end
end

testset("DDP.Reducer: gradients in its buckets, marked in any order, reduced by wait") do
    like = (w = zeros(Float32, 3, 4), b = zeros(Float64, 5), steps = zeros(Int64, 2))
    reducer = DDP.Reducer(like; op = :sum, fusion_bytes = 64)
    gs = DDP.gradients(reducer)
    @test keys(gs) == keys(like) && size(gs.w) == (3, 4) && eltype(gs.b) == Float64
    @test gs.w isa DDP.Gradient{Float32, 2} && isopen(reducer)
    for step in 1:3
        gs.steps .= step
        DDP.mark_ready!(reducer, 3)                      # 1-based index
        gs.b .= rank .+ (1:5)
        DDP.mark_ready!(reducer, gs.b)                   # the array itself
        copyto!(gs.w, [Float32(rank + i * j) for i in 1:3, j in 1:4])
        DDP.mark_ready!(reducer, gs.w)
        @test wait(reducer) === reducer
        @test gs.w == [Float32(sum(r + i * j for r in 0:n-1)) for i in 1:3, j in 1:4]
        @test gs.b == [sum(r + i for r in 0:n-1) for i in 1:5]
        @test gs.steps == fill(n * step, 2)
    end
    # A gradient is a dense array: libddp's collectives take it, as any Array.
    gs.b .= rank .+ (1:5)
    @test allreduce!(gs.b, max) == [n - 1 + i for i in 1:5]
    close(reducer)
    @test !isopen(reducer) && close(reducer) === nothing
    @test gs.steps == fill(3n, 2)                        # readable after close
    @test_throws ArgumentError DDP.mark_ready!(reducer, 1)
    averaging = DDP.Reducer(zeros(Float32, 6))           # :avg by default; one array
    g = DDP.gradients(averaging)
    g .= rank
    wait(DDP.mark_ready!(averaging, g))
    @test g == fill(Float32((n - 1) / 2), 6)
    close(averaging)
end

testset("DDP.Reducer: a bad mark or registration on one rank fails every peer at once") do
    bad = n - 1
    reducer = DDP.Reducer([zeros(Float32, 4), zeros(Float32, 2)])
    gs = DDP.gradients(reducer)
    for (mark, words) in ((() -> DDP.mark_ready!(reducer, 3), "gradient index 3 is out of range"),
                          (() -> DDP.mark_ready!(reducer, zeros(Float32, 4)), "mark_ready! takes one of"),
                          (() -> (DDP.mark_ready!(reducer, 1); DDP.mark_ready!(reducer, 1)), "gradient 1 was already marked"))
        started = time()
        if rank == bad
            error = ddp_error(mark, LibDDP.DDP_ERR_INVALID_ARGUMENT)
            @test occursin(words, error.message)
        else
            foreach(g -> (g .= 1; DDP.mark_ready!(reducer, g)), gs)
            error = ddp_error(() -> wait(reducer), LibDDP.DDP_ERR_MISMATCH)
            @test occursin("rank $bad", error.message)
        end
        @test time() - started < 30  # the world's timeout is 1800 s: nobody waited
        foreach(g -> (g .= rank; DDP.mark_ready!(reducer, g)), gs)
        wait(reducer)                                    # the next step works
        @test gs[1] == fill(Float32((n - 1) / 2), 4)
    end
    close(reducer)
    for (like, op, words) in (((zeros(Float32, 2), zeros(ComplexF32, 2)), :avg, "like[2]: element type"),
                              ("weights", :avg, "like: a String"),
                              (zeros(Float32, 2), :mean, "op :mean"))
        started = time()
        error = ddp_error(() -> DDP.Reducer(rank == bad ? like : zeros(Float32, 2); op = rank == bad ? op : :avg),
                          rank == bad ? LibDDP.DDP_ERR_INVALID_ARGUMENT : LibDDP.DDP_ERR_MISMATCH)
        @test time() - started < 30
        @test rank == bad ? occursin(words, error.message) :
                            occursin("rank $bad passed invalid arguments to reducer_create", error.message)
        @test sums_over(DDP.world(), 0:n-1)              # every rank in step again
    end
end

testset("DDP.Reducer's do form: an exception mid-step on one rank leaves the communicator usable") do
    bad = n - 1
    started = time()
    caught = try
        DDP.Reducer([zeros(Float32, 2), zeros(Float32, 3)]) do reducer
            gs = DDP.gradients(reducer)
            DDP.mark_ready!(reducer, gs[1])
            rank == bad && throw(ArgumentError("a bad batch on rank $bad"))
            DDP.mark_ready!(reducer, gs[2])
            wait(reducer)
        end
    catch thrown
        thrown
    end
    @test time() - started < 30
    if rank == bad
        @test caught isa ArgumentError
    else
        @test caught isa DDPError && caught.status == LibDDP.DDP_ERR_MISMATCH
        @test occursin("rank $bad threw during the step", caught.message)
    end
    @test sums_over(DDP.world(), 0:n-1)                  # no step left open
end

testset("Finalize") do
    sub = DDP.split(DDP.world(), 0)
    DDP.Finalize()
    @test !DDP.Initialized()
    ddp_error(() -> allreduce!(zeros(2), +), LibDDP.DDP_ERR_NOT_INITIALIZED)
    @test DDP.Finalize() === nothing
    # Finalize closed the sub-communicator still open.
    @test !isopen(sub)
    error = ddp_error(() -> allreduce!(zeros(2), +, sub), LibDDP.DDP_ERR_NOT_INITIALIZED)
    @test occursin("whose world was finalized", error.message)
    @test close(sub) === nothing
end

Test.pop_testset()
write_outcomes()
Test.finish(TOP)  # prints the summary; throws (exit code 1) when any test failed
