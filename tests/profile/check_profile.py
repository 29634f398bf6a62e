#!/usr/bin/python3
"""check_profile.py - checks the timelines a profiler test wrote (docs/PROFILING.md).

    check_profile.py local DIR   DIR/local.json of test_profile.c
    check_profile.py merged FILE the merged timeline of a kvstore-launch job (2 workers, 1 server)

Each file must load as JSON and hold Chrome-trace events: complete ("X") events with a
duration, asynchronous ("b"/"e") pairs, per-key args {"key", "bytes"}, and the names the
run must have produced."""
import collections
import json
import sys


def load(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    assert isinstance(events, list) and events, path
    for e in events:
        assert e["ph"] in ("X", "b", "e", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0, e
        if e["ph"] in ("X", "b"):
            assert set(e["args"]) == {"key", "bytes"}, e
            assert isinstance(e["args"]["bytes"], int), e
    opened = collections.Counter(e["id"] for e in events if e["ph"] == "b")
    closed = collections.Counter(e["id"] for e in events if e["ph"] == "e")
    assert opened == closed, "unmatched async events"
    return trace, events


def spans(events, name, key=None):
    return [e for e in events if e["ph"] in ("X", "b") and e["name"] == name
            and (key is None or e["args"]["key"] == key)]


def check_local(folder):
    trace, events = load(folder + "/local.json")
    assert trace["otherData"]["dropped_events"] == 0
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert len(names) == 1, names
    # Two pushes of key 3 (1024 float32), each reduced and applied; pulls copy 4096 bytes.
    assert len(spans(events, "push")) == 2, spans(events, "push")
    assert all(e["args"]["bytes"] == 4096 for e in spans(events, "push"))
    assert len(spans(events, "reduce", 3)) == 2 and len(spans(events, "apply", 3)) == 2
    assert len(spans(events, "apply", 7)) == 1
    assert [e["args"]["bytes"] for e in spans(events, "pull")] == [8192]
    assert {e["args"]["key"] for e in spans(events, "copy out")} == {3, 7}
    assert [e["args"]["bytes"] for e in spans(events, "pushpull")] == [8192]
    assert len(spans(events, "push (failed)")) == 1
    # Every span of key 3 lies inside a data call's span on the same thread.
    calls = [e for e in events if e["ph"] == "X" and e["args"]["key"] is None]
    for e in spans(events, "reduce") + spans(events, "apply"):
        assert any(c["tid"] == e["tid"] and c["ts"] <= e["ts"] and
                   e["ts"] + e["dur"] <= c["ts"] + c["dur"] + 0.002 for c in calls), e
    load(folder + "/threads.json")
    print("local timeline: %d events, valid" % len(events))


def check_merged(path):
    trace, events = load(path)
    nodes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(nodes.values()) == ["scheduler", "server 0", "worker 0", "worker 1"], nodes
    by_node = collections.defaultdict(list)
    for e in events:
        by_node[nodes[e["pid"]]].append(e)
    for w in ("worker 0", "worker 1"):
        ops = spans(by_node[w], "pushpull", 5)
        assert len(ops) >= 2 and all(e["ph"] == "b" and e["args"]["bytes"] == 4096 for e in ops), w
        assert spans(by_node[w], "send PUSHPULL", 5), w
    waits = spans(by_node["server 0"], "round wait PUSHPULL", 5)
    assert len(waits) >= 4, waits
    assert spans(by_node["server 0"], "reduce", 5) and spans(by_node["server 0"], "recv PUSHPULL", 5)
    # Aligned clocks: each of server 0's rounds ends after the pushes of both workers began.
    first_push = min(e["ts"] for w in ("worker 0", "worker 1") for e in spans(by_node[w], "pushpull", 5))
    first_reduce = min(e["ts"] for e in spans(by_node["server 0"], "reduce", 5))
    assert first_reduce >= first_push, (first_reduce, first_push)
    print("merged timeline: %d events from %d nodes, valid" % (len(events), len(nodes)))


if __name__ == "__main__":
    {"local": check_local, "merged": check_merged}[sys.argv[1]](sys.argv[2])
