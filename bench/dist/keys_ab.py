#!/usr/bin/env python3
"""The key-count table of two libkvstore builds, interleaved: per-key cost of a push + pull of
K keys in one call (K = 100 .. 100,000), from C (dist_bench --keys) or from Python (the
kvstore cells of bench/compare/run.py's dist-keys section), per library the median over
rounds and the ratio to K = 100, and the ratio B/A per K.

  bench/dist/keys_ab.py --build BUILD --a LIBDIR_A --b LIBDIR_B [--rounds 3] [--config 1x1]
                        [--keys 100,1000,10000,100000] [--python]

BUILD is a build directory of this tree (its bench/dist/dist_bench, tools/kvstore-server);
LIBDIR_A and LIBDIR_B hold a libkvstore.so.0 each (copies of two builds' libraries). Every
process of a job loads the library of its side through LD_LIBRARY_PATH (the binaries' RUNPATH
gives way to it) and, from Python, KVSTORE_LIBRARY. Rounds alternate which side goes first.
From C the table shows worker 0's process CPU time per key (application, I/O and ZeroMQ
threads; the servers' not included), the figure to read on a shared machine, and wall time;
from Python, wall time per key as bench/compare/run.py measures it (worker 0's median over
its iterations). Jobs are open (no CURVE), as the other dist tables are.
"""
import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
ROW = re.compile(r"\[worker 0\] (\d+)\s+\d+\s+([\d.]+)\s+[\d.]+\s+([\d.]+)")


def run_c(a, lib):
    w, s = a.config.split("x")
    env = dict(os.environ, LD_LIBRARY_PATH=lib)
    cmd = [sys.executable, os.path.join(ROOT, "tools", "kvstore-launch"), "-n", w, "-s", s,
           "--env", "KVSTORE_JOB_SECRET=", "--server-cmd",
           os.path.join(a.build, "tools", "kvstore-server"), "--",
           os.path.join(a.build, "bench", "dist", "dist_bench"), "--keys", a.keys, "--reps", "3"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200).stdout
    got = {}
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            got[int(m.group(1))] = {"wall": float(m.group(2)), "cpu": float(m.group(3))}
    return got


def run_py(a, lib, cmp):
    w, s = (int(x) for x in a.config.split("x"))
    os.environ["LD_LIBRARY_PATH"] = lib
    os.environ["KVSTORE_LIBRARY"] = os.path.join(lib, "libkvstore.so.0")
    ns = types.SimpleNamespace(tunables=cmp.malloc_tunables(), job_timeout=1200,
                               server=os.path.join(a.build, "tools", "kvstore-server"),
                               warmup_bytes=64 << 20)
    res = cmp.run_job("kvstore", w, s, ["--dist-sizes", "", "--key-counts", a.keys], ns) or {}
    return {int(k.split()[1]): {"wall": v * 1e6} for k, v in res.items() if k.startswith("keys ")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--a", required=True, help="directory of library A (libkvstore.so.0)")
    ap.add_argument("--b", required=True, help="directory of library B")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--config", default="1x1", help="workers x servers")
    ap.add_argument("--keys", default="100,1000,10000,100000")
    ap.add_argument("--python", action="store_true", help="through the Python binding")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    cmp = None
    if a.python:
        spec = importlib.util.spec_from_file_location("cmp_run", os.path.join(ROOT, "bench", "compare", "run.py"))
        cmp = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cmp)
    samples = {"A": {}, "B": {}}
    for rnd in range(a.rounds):
        sides = [("A", a.a), ("B", a.b)]
        for name, lib in (sides if rnd % 2 == 0 else sides[::-1]):
            got = run_py(a, lib, cmp) if a.python else run_c(a, lib)
            for k, v in got.items():
                samples[name].setdefault(k, []).append(v)
            print("round %d %s: %s" % (rnd + 1, name, " ".join(
                "%d:%s" % (k, "/".join("%.2f" % x for x in v.values())) for k, v in sorted(got.items()))))
            sys.stdout.flush()
    metric = "wall" if a.python else "cpu"
    med = {n: {k: {m: statistics.median(x[m] for x in v) for m in v[0]} for k, v in samples[n].items()}
           for n in samples}
    ks = sorted(set(med["A"]) & set(med["B"]))
    first = ks[0]
    print("%s %s, us per key (%s%s), median of %d rounds; ratio: to K = %d" % (
        "Python" if a.python else "C", a.config, metric, "" if a.python else "; wall beside it",
        a.rounds, first))
    print("%8s | %9s %6s | %9s %6s | %5s" % ("K", "A " + metric, "ratio", "B " + metric, "ratio", "B/A"))
    for k in ks:
        va, vb = med["A"][k][metric], med["B"][k][metric]
        wall = "" if a.python else "   (wall A %.2f, B %.2f)" % (med["A"][k]["wall"], med["B"][k]["wall"])
        print("%8d | %9.2f %6.2f | %9.2f %6.2f | %5.2f%s" % (
            k, va, va / med["A"][first][metric], vb, vb / med["B"][first][metric], vb / va, wall))


if __name__ == "__main__":
    main()
