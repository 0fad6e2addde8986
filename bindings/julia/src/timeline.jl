# What every rank did: a timeline of the collectives and the flight recorder
# (docs/timeline.md; scripts/ddp-trace merges and explains what they write).

"""
    timeline(f, path; comm = DDP.world())

Records a Chrome trace-event timeline of every collective while `f()` runs, then
completes this rank's file and returns `f()`'s value. The file is `path` with `%r`
replaced by the rank, else with `.rankR` before a final `.json`
(`"trace.json"` → `trace.rank0.json`). Collective: every rank calls it in the
same place among its collectives. Meanwhile the tree calls (`allreduce_gradients`,
`synchronize!`, `allreduce!` on a `Tuple`/`NamedTuple`/`Vector`) name each array in
the events by its path: field names and 1-based indices joined with dots
(`layer_1.weight`, `state.1`). `DDP_TIMELINE` at `DDP.Init()` does the same for the
whole run.

```julia
timeline("run/trace.json") do
    for batch in batches
        allreduce_gradients(gs)
    end
end
```
"""
function timeline(f, path::AbstractString; comm::Communicator = world())
    check(LibDDP.ddp_timeline_start(comm.handle, path))
    TIMELINE_RECORDING[] = true
    try
        return f()
    finally
        TIMELINE_RECORDING[] = false
        check(LibDDP.ddp_timeline_stop(comm.handle))
    end
end

"""
    dump_flight_recorder(path = nothing; comm = DDP.world())

Writes this rank's flight recorder (its last collectives: kind, sequence number,
sizes, times and state) to `path` as given, every `%r` in it replaced by the rank
(`"fr.%r.json"`: a file per rank), or, with `nothing`, where libddp's automatic dumps
go (`DDP_FLIGHT_RECORDER_DIR`, else a folder per job under the temporary directory;
the log names the file). Local.
"""
function dump_flight_recorder(path::Union{Nothing, AbstractString} = nothing; comm::Communicator = world())
    check(LibDDP.ddp_dump_flight_recorder(comm.handle, something(path, C_NULL)))
    return nothing
end
