# The test sets' outcomes, for scripts/summarize-tests.py: with DDP_TEST_RESULTS=FILE,
# one libtest line per top-level test set is written to FILE. Included by runtests.jl
# and local_group.jl.
using Test

"""Outcome of every top-level test set, by name: "ok", "FAILED" or "ignored"."""
const OUTCOMES = Pair{String, String}[]

"""
    testset(body, name; runs = true)

Runs `body` as a test set recorded under `name` in `OUTCOMES`; one that does not run
(its extension's package is not loadable) is recorded as ignored.
"""
function testset(body, name::AbstractString; runs::Bool = true)
    if !runs
        push!(OUTCOMES, name => "ignored")
        return
    end
    set = @testset "$name" begin
        body()
    end
    counts = Test.get_test_counts(set)
    bad = counts isa Tuple ? counts[2] + counts[3] + counts[6] + counts[7] :
        counts.fails + counts.errors + counts.cumulative_fails + counts.cumulative_errors
    push!(OUTCOMES, name => (bad == 0 ? "ok" : "FAILED"))
end

"""Writes `OUTCOMES` to the file `DDP_TEST_RESULTS` names, if it names one."""
function write_outcomes()
    haskey(ENV, "DDP_TEST_RESULTS") || return
    open(ENV["DDP_TEST_RESULTS"], "w") do io
        foreach(((name, outcome),) -> println(io, "test ", name, " ... ", outcome), OUTCOMES)
        failed = count(o -> last(o) == "FAILED", OUTCOMES)
        println(io, "test result: ", failed == 0 ? "ok" : "FAILED", ". ",
                count(o -> last(o) == "ok", OUTCOMES), " passed; ", failed, " failed; ",
                count(o -> last(o) == "ignored", OUTCOMES), " ignored")
    end
end
