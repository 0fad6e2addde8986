"""ddp.timeline and ddp.dump_flight_recorder from Python: real scripts under
real mpirun. The leaves' tree paths reach the trace as names, and
scripts/ddp-trace draws the summary PNG from the ranks' files."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

ENVIRONMENT = {**{k: v for k, v in os.environ.items() if not k.startswith(("DDP_TIMELINE", "DDP_FLIGHT"))},
               "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
DDP_TRACE = str(ROOT / "scripts" / "ddp-trace")


def run(folder, source, ranks=None):
    script = folder / "script.py"
    script.write_text(textwrap.dedent(source))
    command = [sys.executable, str(script)]
    if ranks:
        command = ["mpirun", "-np", str(ranks)] + command
    result = subprocess.run(command, env=ENVIRONMENT, cwd=folder, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def calls(trace):
    rows = {e["tid"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"].endswith(": calls")}
    return [e for e in sorted(trace["traceEvents"], key=lambda e: e.get("ts", 0))
            if e["ph"] == "X" and e["tid"] in rows]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Two ranks training a few steps of a dict-of-dicts model inside ddp.timeline."""
    folder = tmp_path_factory.mktemp("timeline")
    run(folder, """
        import numpy as np
        import ddp
        comm = ddp.init()
        params = {"layer1": {"weight": np.ones((4, 3), np.float32), "bias": np.zeros(4, np.float32)},
                  "out": [np.ones(4, np.float32)]}
        comm.allreduce(np.ones(2))  # before the timeline: not in it
        with ddp.timeline("trace.json") as file:
            assert file == f"trace.rank{comm.rank}.json", file
            comm.broadcast(params, root=0)
            for step in range(3):
                comm.allreduce_gradients(params)
            request = comm.allreduce_async(params)
            request.wait()
            with comm.reducer([params["out"][0], params["layer1"]["bias"]]) as reducer:
                reducer.mark_ready(1)
                reducer.mark_ready(0)
                reducer.wait()
        comm.allreduce(np.ones(2))  # after it: not in it either
    """, ranks=2)
    return folder, [json.loads((folder / f"trace.rank{r}.json").read_text()) for r in range(2)]


def test_every_call_of_the_block_is_in_each_ranks_file_once(recorded):
    _, traces = recorded
    for rank, trace in enumerate(traces):
        assert trace["otherData"]["rank"] == rank
        got = [(e["name"], e["args"]["seq"]) for e in calls(trace)]
        # seq 1 is the allreduce before the block, 13 the one after it; 9 is the
        # binding's check of the reducer's tree paths and shapes after its creation.
        assert got == [("timeline_start", 2), ("broadcast", 3), ("allreduce", 4), ("allreduce", 5),
                       ("allreduce", 6), ("allreduce", 7), ("reducer_create", 8), ("allreduce", 9),
                       ("reducer step", 10)], got


def test_leaves_are_named_by_their_tree_paths(recorded):
    _, traces = recorded
    for trace in traces:
        by_name = {e["args"]["seq"]: e for e in calls(trace)}
        expected = ["layer1.bias", "layer1.weight", "out.0"]  # optree: dict keys sorted
        assert by_name[3]["args"]["names"] == expected
        assert by_name[4]["args"]["names"] == expected
        assert by_name[7]["args"]["names"] == expected  # async: copied before the call returned
        assert by_name[8]["args"]["names"] == ["0", "1"]
        marks = [e for e in trace["traceEvents"] if e["name"] == "mark_ready"]
        assert [m["args"]["names"] for m in marks] == [["1"], ["0"]]


def test_the_summary_png_is_drawn_from_the_ranks_files(recorded):
    folder, _ = recorded
    png = folder / "summary.png"
    subprocess.run([sys.executable, DDP_TRACE, "summary", str(png), str(folder / "trace.rank0.json"),
                    str(folder / "trace.rank1.json")], check=True, timeout=120)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 5000  # a picture, not an empty canvas


def test_bad_paths_raise_and_a_dump_is_written_on_demand(tmp_path):
    run(tmp_path, """
        import json
        import numpy as np
        import pytest
        import ddp
        comm = ddp.init()
        with pytest.raises(ddp.InvalidArgumentError, match="nonexistent-folder/t.rank0.json"):
            with ddp.timeline("/nonexistent-folder/t.json"):
                pass
        with pytest.raises(TypeError, match="path"):
            with ddp.timeline(3):
                pass
        comm.allreduce(np.ones(3))
        ddp.dump_flight_recorder("fr.%r.json")
        dump = json.load(open("fr.0.json"))
        assert [(c["seq"], c["kind"], c["state"], c["bytes"]) for c in dump["calls"]] == \\
            [(1, "timeline_start", "failed", 0), (2, "allreduce", "finished", 24)], dump
        with pytest.raises(ddp.InvalidArgumentError, match="cannot write the flight recorder"):
            ddp.dump_flight_recorder("/nonexistent-folder/fr.json")
    """)
