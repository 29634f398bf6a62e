#!/usr/bin/env python3
"""bench_local against two libraries, interleaved (A B, then B A, ...) and repeated: per-row
medians of push/base and pull/base (bench_local's own ratios against its in-run bandwidth
kernel) and of the push+pull latency, and the ratio B/A of each.

  bench/ab_local.py --bench BUILD/bench/bench_local --a LIBDIR[,K=V...] --b LIBDIR[,K=V...]
                    [--rounds 5] [--args "--quick"]

LIBDIR holds the libkvstore.so.0 to load (through LD_LIBRARY_PATH; the bench's RUNPATH is
searched after it); K=V pairs are set in that variant's environment (KVSTORE_PROFILE=/tmp/t.json
profiles it). Used for the profiler's cost in docs/PROFILING.md.
"""
import argparse
import os
import re
import statistics
import subprocess

ROW = re.compile(r"^(\d+)\s+(float\d+)\s+(\d+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s*$")
LAT = re.compile(r"^latency: .*: ([\d.]+) us")


def variant(text):
    lib, *pairs = text.split(",")
    return os.path.abspath(lib), dict(p.split("=", 1) for p in pairs)


def run(bench, var, extra):
    lib, env_add = var
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env.update(env_add)
    out = subprocess.run([bench] + extra, env=env, capture_output=True, text=True, check=True).stdout
    cells = {}
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            key = "%s %s K=%s" % (m.group(1), m.group(2), m.group(3))
            cells[key + " push/base"] = float(m.group(4))
            cells[key + " pull/base"] = float(m.group(5))
        m = LAT.match(line)
        if m:
            cells["latency us (lower is better)"] = float(m.group(1))
    return cells


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", required=True)
    p.add_argument("--a", required=True, type=variant)
    p.add_argument("--b", required=True, type=variant)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--args", default="--quick")
    a = p.parse_args()
    samples = {"A": [], "B": []}
    for r in range(a.rounds):
        order = [("A", a.a), ("B", a.b)] if r % 2 == 0 else [("B", a.b), ("A", a.a)]
        for name, var in order:
            samples[name].append(run(a.bench, var, a.args.split()))
    print("%-40s %9s %9s %7s" % ("cell (median of %d runs)" % a.rounds, "A", "B", "B/A"))
    for key in samples["A"][0]:
        ma = statistics.median(s[key] for s in samples["A"])
        mb = statistics.median(s[key] for s in samples["B"])
        print("%-40s %9.3f %9.3f %7.3f" % (key, ma, mb, mb / ma if ma else float("nan")))


if __name__ == "__main__":
    main()
