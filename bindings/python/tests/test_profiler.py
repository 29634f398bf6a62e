"""kvstore.profiler (docs/PROFILING.md): the timeline a run writes (valid JSON with the
calls' and keys' spans and bytes), the per-key counters, the context manager, refusals,
and KVSTORE_PROFILE writing the timeline at exit."""
import json
import subprocess
import sys

import pytest

import kvstore
from kvstore import kv, nd, profiler
from conftest import subprocess_env


@pytest.fixture(autouse=True)
def stopped():
    profiler.stop()
    yield
    profiler.stop()


def spans(trace, name, key=None):
    return [e for e in trace["traceEvents"] if e["ph"] in ("X", "b") and e["name"] == name
            and (key is None or e["args"]["key"] == key)]


def test_timeline_and_counters_of_a_local_store(tmp_path):
    path = tmp_path / "t.json"
    with kv.create("local") as store:
        store.init(3, nd.ones((256,)))
        store.init(4, nd.ones((8,), dtype="float64"))
        store.set_optimizer("sgd(learning_rate=0.5)")
        profiler.start(path)
        store.push(3, nd.ones((256,)))
        store.push([3, 4], [nd.ones((256,)), nd.ones((8,), dtype="float64")])
        out = nd.zeros((256,))
        store.pull(3, out=out)
        running = profiler.stats()
        profiler.stop()
        store.push(3, nd.ones((256,)))  # not counted: the profiler stopped
    assert running["running"] is True and running["node"] == ""
    keys = {r["key"]: r for r in profiler.stats()["keys"]}
    assert profiler.stats()["running"] is False
    assert sorted(keys) == [3, 4]
    assert (keys[3]["pushes"], keys[3]["pulls"], keys[3]["bytes_pushed"], keys[3]["bytes_pulled"]) == (2, 1, 2048, 1024)
    assert (keys[4]["pushes"], keys[4]["bytes_pushed"], keys[4]["pulls"]) == (1, 64, 0)
    assert keys[3]["applies"] == 2 and keys[3]["apply_us"] > 0 and keys[3]["reduce_us"] > 0
    with open(path) as f:
        trace = json.load(f)
    assert [e["args"]["bytes"] for e in spans(trace, "push")] == [1024, 1088]
    assert [e["args"]["bytes"] for e in spans(trace, "pull")] == [1024]
    assert len(spans(trace, "apply", 3)) == 2 and len(spans(trace, "apply", 4)) == 1
    assert [e["args"]["bytes"] for e in spans(trace, "reduce", 4)] == [64]
    assert all(e["dur"] >= 0 for e in trace["traceEvents"] if e["ph"] == "X")
    assert trace["otherData"]["dropped_events"] == 0


def test_string_keys_and_the_context_manager(tmp_path):
    path = tmp_path / "s.json"
    with kv.create("local") as store:
        store.init("w\"eight", nd.ones((4,)))
        with profiler.profile(str(path)):
            store.pushpull("w\"eight", nd.ones((4,)), out=nd.zeros((4,)))
    (rec,) = profiler.stats()["keys"]
    assert rec["key"] == "w\"eight" and rec["pushes"] == 1 and rec["pulls"] == 1
    trace = json.loads(path.read_text())
    assert spans(trace, "copy out", "w\"eight") and spans(trace, "pushpull")


def test_counters_only_and_refusals(tmp_path):
    profiler.start()
    with pytest.raises(kvstore.InvalidArgumentError, match="already runs"):
        profiler.start(tmp_path / "x.json")
    with kv.create("local") as store:
        store.init(1, nd.ones((2,)))
        store.push(1, nd.ones((2,)))
    profiler.stop()
    assert [r["pushes"] for r in profiler.stats()["keys"]] == [1]
    assert not list(tmp_path.iterdir())
    with pytest.raises(kvstore.InvalidArgumentError, match="not writable"):
        profiler.start(tmp_path / "no" / "such" / "t.json")
    with pytest.raises(ValueError, match="NUL"):
        profiler.start("a\0b")
    profiler.start()  # a new run starts from zero
    assert profiler.stats()["keys"] == []


def test_environment_variable_writes_at_exit(tmp_path):
    path = tmp_path / "env.json"
    env = subprocess_env()
    env["KVSTORE_PROFILE"] = str(path)
    code = ("from kvstore import kv, nd\n"
            "s = kv.create('local'); s.init(7, nd.ones((16,))); s.push(7, nd.ones((16,)))\n")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    trace = json.loads(path.read_text())
    assert [e["args"]["bytes"] for e in spans(trace, "push")] == [64]
    assert spans(trace, "reduce", 7)
