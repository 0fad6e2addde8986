"""Runs trace_script under mpirun -np 2 and checks what it left: the ranks'
timelines (valid JSON, trace-event fields, every call once per rank with
its sequence number, a merged trace in a consistent order) and the flight
recorder dumps that scripts/ddp-trace explain turns into a sentence.

    check_trace.py CHECK TRACE_SCRIPT DDP_TRACE_TOOL

CHECK is one of the functions named in CHECKS below.
"""
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

RANKS = 2
# trace_script's `timeline` calls, in order: their sequence numbers are 1, 2, ...
SCRIPT = ["timeline_start", "broadcast", "allreduce", "allreduce", "allreduce", "reducer_create",
          "reducer step", "reducer step", "check_replicas", "barrier"]
PHASES = {"X", "B", "E", "i", "M"}


def expected_plane(nbytes):
    """The shared-memory plane takes host steps from 4 KiB where each rank
    has a CPU of its own (docs/shm.md); MPI the rest."""
    return "shm" if (os.cpu_count() or 1) >= RANKS and nbytes >= 4096 else "mpi"


def run(script, mode, *args, env=None):
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("DDP_TIMELINE", "DDP_FLIGHT"))}
    environment.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", DDP_BACKEND="", **(env or {}))
    result = subprocess.run(["mpirun", "-np", str(RANKS), script, mode, *args], env=environment,
                            capture_output=True, text=True, timeout=120)
    sys.stderr.write(result.stderr[-4000:])
    assert result.returncode == 0, f"trace_script {mode} failed on a rank: {result.stdout}{result.stderr[-2000:]}"
    return result


def tool(ddp_trace, *args):
    result = subprocess.run([sys.executable, ddp_trace, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def check_event(event, rank):
    """The trace-event format's fields (Chrome's Trace Event Format)."""
    assert event["ph"] in PHASES, event
    assert event["pid"] == rank and isinstance(event["tid"], int), event
    assert isinstance(event["name"], str) and event["name"], event
    if event["ph"] == "M":
        return
    assert event["cat"] == "ddp" and isinstance(event["ts"], (int, float)) and event["ts"] >= 0, event
    assert isinstance(event["args"], dict), event
    if event["ph"] == "X":
        assert isinstance(event["dur"], (int, float)) and event["dur"] >= 0, event
    if event["ph"] == "i":
        assert event["s"] in ("t", "p", "g"), event


def recorded_timeline(script, folder):
    run(script, "timeline", str(folder / "trace.%r.json"))
    traces = []
    for rank in range(RANKS):
        trace = json.loads((folder / f"trace.{rank}.json").read_text())  # valid JSON, complete
        other = trace["otherData"]
        assert other["rank"] == rank and other["size"] == RANKS and other["backend"] == "mpi", other
        assert other["clock_samples"] > 0 and abs(other["clock_offset_us"]) < 1e6, other
        for event in trace["traceEvents"]:
            check_event(event, rank)
        traces.append(trace)
    return traces


def calls_of(trace):
    """The calls-row events: one per collective, in the order they started."""
    kinds = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"
             and e["args"]["name"].endswith(": calls")}
    return sorted((e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] in kinds),
                  key=lambda e: e["ts"])


def schema(script, ddp_trace, folder):
    for trace in recorded_timeline(script, folder):
        names = {e["name"] for e in trace["traceEvents"]}
        for phase in ("agreement", "agreement + small allreduce", "pack", "transfer", "unpack + divide", "wait",
                      "queued", "mark_ready", "bucket", "divide", "hash"):
            assert phase in names, f"no {phase!r} event in {sorted(names)}"
        for event in trace["traceEvents"]:
            if event["name"] in ("transfer", "bucket", "pack"):
                assert event["args"]["bytes"] > 0 and "seq" in event["args"], event
            if event["name"] in ("transfer", "bucket"):
                assert event["args"]["plane"] == expected_plane(event["args"]["bytes"]), event


def sequence(script, ddp_trace, folder):
    for rank, trace in enumerate(recorded_timeline(script, folder)):
        calls = calls_of(trace)
        got = [(e["name"], e["args"]["seq"]) for e in calls]
        assert got == [(kind, seq) for seq, kind in enumerate(SCRIPT, start=1)], f"rank {rank}: {got}"
        assert not any(e["args"].get("failed") for e in calls)
        by_seq = {e["args"]["seq"]: e for e in calls}
        assert by_seq[2]["args"]["names"] == ["layer1.weight", "layer1.bias", "layer2.weight"]
        assert by_seq[4]["args"]["names"] == ["g0", "g1", "g2", 'big "quoted"']
        assert by_seq[3]["args"]["plane"] == "agreement's messages", by_seq[3]
        # A host call names its transport; each step's transfer names the plane that ran it.
        assert by_seq[4]["args"]["plane"] == "mpi", by_seq[4]
        assert by_seq[4]["args"]["bytes"] == 4 * (3 * 8 + 40000)
        # Every phase event belongs to a call of the script, inside its time.
        for event in trace["traceEvents"]:
            seq = event.get("args", {}).get("seq")
            if seq is None or event["ph"] == "M":
                continue
            call = by_seq[seq]
            assert call["ts"] - 1 <= event["ts"] <= call["ts"] + call["dur"] + 1, (event, call)
        marks = [e for e in trace["traceEvents"] if e["name"] == "mark_ready"]
        assert [(e["args"]["seq"], e["args"]["gradient"]) for e in marks] == \
            [(seq, i) for seq in (7, 8) for i in (3, 2, 1, 0)], marks
        assert marks[0]["args"]["names"] == ['big "quoted"']


def merge(script, ddp_trace, folder):
    recorded_timeline(script, folder)
    merged_path = folder / "merged.json"
    tool(ddp_trace, "merge", str(merged_path), *(str(folder / f"trace.{r}.json") for r in range(RANKS)))
    merged = json.loads(merged_path.read_text())
    events = merged["traceEvents"]
    for event in events:
        check_event(event, event["pid"])
    timed = [e for e in events if e["ph"] != "M"]
    assert [e["ts"] for e in timed] == sorted(e["ts"] for e in timed), "merged events out of time order"
    assert min(e["ts"] for e in timed) == 0
    assert {e["pid"] for e in events} == set(range(RANKS))
    assert all(e["ph"] == "M" for e in events[:len(events) - len(timed)]), "metadata first"
    # Per rank, the calls keep their order and sequence numbers; and since
    # every collective needs every rank, call k+1 starts on each rank after
    # call k started on every rank (up to the clock offsets' precision).
    spread = max(1.0, 2 * max(abs(v) for v in merged["otherData"]["clock_offset_us"].values()))
    per_rank = {}
    for rank in range(RANKS):
        names = {e["tid"] for e in events if e["pid"] == rank and e["ph"] == "M" and e["name"] == "thread_name"
                 and e["args"]["name"].endswith(": calls")}
        calls = [e for e in timed if e["pid"] == rank and e["tid"] in names and e["ph"] == "X"]
        assert [e["args"]["seq"] for e in calls] == list(range(1, len(SCRIPT) + 1)), calls
        per_rank[rank] = calls
    for k in range(1, len(SCRIPT)):
        latest_start = max(per_rank[r][k - 1]["ts"] for r in range(RANKS))
        earliest_end = min(per_rank[r][k - 1]["ts"] + per_rank[r][k - 1]["dur"] for r in range(RANKS))
        assert latest_start <= earliest_end + spread, f"call {k}: a rank finished before another started it"


def explained(ddp_trace, files):
    sentence = tool(ddp_trace, "explain", *map(str, files)).strip()
    print(sentence)
    assert "\n" not in sentence
    return sentence


def forced_timeout(script, ddp_trace, folder):
    result = run(script, "timeout", env={"DDP_TIMEOUT_S": "1", "DDP_FLIGHT_RECORDER_DIR": str(folder)})
    dumps = [folder / f"ddp-flight-recorder.rank{r}.json" for r in range(RANKS)]
    # The log: one line per rank that broke, naming its dump; no JSON.
    lines = [line for line in result.stderr.splitlines() if line.startswith("[ddp ")]
    assert len(lines) <= RANKS and "{" not in result.stderr, result.stderr
    assert all(len(line) <= 400 for line in lines), lines  # a few hundred bytes per rank
    assert f"(flight recorder: {dumps[0]})" in result.stderr, result.stderr
    states = {r: json.loads(d.read_text())["calls"][-1]["state"] for r, d in enumerate(dumps)}
    assert states[0] == "timed out", states
    sentence = explained(ddp_trace, dumps)
    assert sentence.startswith("Rank 1 is behind: its last call is #3 (allreduce of 1 tensor, 4 bytes; finished)"), \
        sentence
    assert "never entered #4, the barrier that rank 0 entered" in sentence, sentence
    assert "rank 0 is at #4 (barrier, timed out)" in sentence, sentence


def forced_mismatch(script, ddp_trace, folder):
    result = run(script, "mismatch", env={"DDP_FLIGHT_RECORDER_DIR": str(folder)})
    # The caught mismatch logs nothing; each rank's on-demand dump, one line naming its file.
    lines = [line for line in result.stderr.splitlines() if line.startswith("[ddp ")]
    assert len(lines) == RANKS and all("flight recorder written to" in line for line in lines), result.stderr
    dumps = [folder / f"ddp-flight-recorder.rank{r}.json" for r in range(RANKS)]
    sentence = explained(ddp_trace, dumps)
    assert sentence.startswith("Call #3 is the first that differs between ranks: rank 0 called allreduce of "
                               "3 tensors (12 bytes) but rank 1 called allreduce of 2 tensors (8 bytes)"), sentence
    assert "ended in a mismatch" in sentence and "(#1 to #2) matched" in sentence, sentence


def forced_abort(script, ddp_trace, folder):
    run(script, "abort", env={"DDP_FLIGHT_RECORDER_DIR": str(folder)})
    dumps = {r: json.loads((folder / f"ddp-flight-recorder.rank{r}.json").read_text()) for r in range(RANKS)}
    assert "rank 0 aborted the communicator (a NaN loss)" in dumps[0]["reason"], dumps[0]["reason"]
    assert "rank 0 aborted the communicator" in dumps[1]["reason"], dumps[1]["reason"]
    for dump in dumps.values():
        assert [(c["seq"], c["state"]) for c in dump["calls"][:2]] == [(1, "finished"), (2, "finished")], dump
    # Rank 0 stopped after #2; rank 1 may have entered #3 before the notice came.
    sentence = explained(ddp_trace, [folder / f"ddp-flight-recorder.rank{r}.json" for r in range(RANKS)])
    assert sentence.startswith(("Rank 0 is behind: its last call is #2", "All 2 ranks ran the same calls up to #2")), \
        sentence
    assert sentence.endswith("Rank 0 dumped first: rank 0 aborted the communicator (a NaN loss); it is unusable: "
                             "finalize it and end the job."), sentence


def on_demand(script, ddp_trace, folder):
    # A temporary directory of its own: an earlier job given the same job id
    # (Open MPI reuses them) may have left dumps in /tmp's job folder.
    temporary = folder / "tmp"
    temporary.mkdir()
    result = run(script, "dump", str(folder / "fr.%r.json"), env={"TMPDIR": str(temporary)})
    dumps = [folder / f"fr.{r}.json" for r in range(RANKS)]
    for rank, dump in enumerate(dumps):
        content = json.loads(dump.read_text())
        assert content["rank"] == rank and content["reason"] == "ddp_dump_flight_recorder"
        assert [(c["seq"], c["kind"], c["state"]) for c in content["calls"]] == \
            [(1, "allreduce", "finished"), (2, "broadcast", "finished"), (3, "barrier", "finished")], content
        assert content["calls"][0]["tensors"] == 1 and content["calls"][0]["bytes"] == 4
    assert explained(ddp_trace, dumps).startswith("All 2 ranks ran the same calls up to #3 (barrier)")
    # Without DDP_FLIGHT_RECORDER_DIR, ddp_dump_flight_recorder(NULL) writes into the job's own
    # folder under the temporary directory (mode 0700, files 0600) and the log names the file.
    written = [Path(p) for p in re.findall(r"flight recorder written to (\S+)", result.stderr)]
    assert len(written) == RANKS and len({p.parent for p in written}) == 1, result.stderr
    job = written[0].parent
    assert job.parent == temporary / f"ddp-{os.geteuid()}", job
    assert stat.S_IMODE(job.stat().st_mode) == 0o700 and stat.S_IMODE(job.parent.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in written)
    assert explained(ddp_trace, [job]).startswith("All 2 ranks ran the same calls up to #3")  # the folder
    for path in written:
        path.unlink()


def bad_path(script, ddp_trace, folder):
    run(script, "bad_path", str(folder / "t.json"))
    for rank in range(RANKS):  # started once it worked, completed by ddp_finalize
        trace = json.loads((folder / f"t.rank{rank}.json").read_text())
        assert [e["name"] for e in calls_of(trace)] == ["timeline_start", "barrier"], calls_of(trace)


def contended(script, ddp_trace, folder):
    # Rank 1 marks its last gradient 50 ms late: rank 0's wait for that
    # bucket sleeps, shows it on the timeline and logs the contended mode.
    result = run(script, "contended", str(folder / "c.%r.json"), env={"DDP_LOG_LEVEL": "debug"})
    events = json.loads((folder / "c.0.json").read_text())["traceEvents"]
    waits = [e for e in events if e["name"] == "wait" and e["ph"] == "X"]
    asleep = [e for e in events if e["name"] == "asleep" and e["ph"] == "X"]
    assert asleep and max(e["dur"] for e in asleep) >= 20000, asleep  # µs
    for sleep in asleep:  # each inside a wait of its own thread
        assert any(w["tid"] == sleep["tid"] and w["ts"] - 1 <= sleep["ts"] and
                   sleep["ts"] + sleep["dur"] <= w["ts"] + w["dur"] + 1 for w in waits), (sleep, waits)
    assert re.search(r"\[ddp 0/2 [^]]*\] contended: a wait for data in reducer step", result.stderr), \
        result.stderr[-2000:]


CHECKS = {f.__name__: f for f in (schema, sequence, merge, forced_timeout, forced_mismatch, forced_abort, on_demand,
                                   bad_path, contended)}

if __name__ == "__main__":
    check, script, ddp_trace = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as folder:
        CHECKS[check](script, ddp_trace, Path(folder))
    print(f"{check}: ok")
