#!/usr/bin/env python3
"""Two builds of kvstore side by side: dist_bench through each build's own launcher, server and
library, interleaved (A B, then B A, ...) and repeated, per-cell medians and the ratio B/A.

  bench/dist/ab_builds.py --a OLD_SRC:OLD_BUILD --b NEW_SRC:NEW_BUILD [--rounds 3]
                          [--configs 1x1,2x2] [--sizes 4K,64K,1M,16M] [--seconds 0.2] [--reps 3]

SRC is a source tree (its tools/kvstore-launch is used) and BUILD its build directory (with
tools/kvstore-server and bench/dist/dist_bench built). Jobs run open (no CURVE), as the
dist figures in docs/PERFORMANCE.md do. GB/s columns: higher is better; latency (pushL,
pullL, microseconds): lower is better. On a shared machine read ratios, not absolute values.
"""
import argparse
import collections
import re
import statistics
import subprocess
import sys

ROW = re.compile(r"\[worker 0\] (\d+ [KM]iB)\s*\|\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*\|"
                 r"\s*([\d.]+)\s+[\d.]+\s*\|\s*([\d.]+)\s+[\d.]+\s*\|\s*([\d.]+)\s+[\d.]+\s*\|"
                 r"\s*(\S+)\s+(\S+)")


def run(tree, cfg, args):
    src, build = tree
    workers, servers = cfg
    cmd = [sys.executable, f"{src}/tools/kvstore-launch", "-n", str(workers), "-s", str(servers),
           "--env", "KVSTORE_JOB_SECRET=", "--server-cmd", f"{build}/tools/kvstore-server", "--",
           f"{build}/bench/dist/dist_bench", "--sizes", args.sizes, "--seconds", str(args.seconds),
           "--reps", str(args.reps)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    cells = {}
    for line in out.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        size = m.group(1)
        cells[(size, "push")] = float(m.group(5))
        cells[(size, "pull")] = float(m.group(6))
        cells[(size, "pushpull")] = float(m.group(7))
        if m.group(8) != "-":
            cells[(size, "pushL")] = float(m.group(8))
            cells[(size, "pullL")] = float(m.group(9))
    if not cells:
        sys.exit(f"ab_builds: no table from {' '.join(cmd)}")
    return cells


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="SRC:BUILD of the baseline")
    p.add_argument("--b", required=True, help="SRC:BUILD of the build under test")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--configs", default="1x1,2x2")
    p.add_argument("--sizes", default="4K,64K,1M,16M")
    p.add_argument("--seconds", type=float, default=0.2)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    trees = {"A": tuple(args.a.split(":", 1)), "B": tuple(args.b.split(":", 1))}
    configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]
    seen = collections.defaultdict(list)
    for rnd in range(args.rounds):
        for cfg in configs:
            for name in ("A", "B") if rnd % 2 == 0 else ("B", "A"):
                for cell, value in run(trees[name], cfg, args).items():
                    seen[(cfg, cell, name)].append(value)
    print(f"{'config':7s} {'size':7s} {'op':9s} {'A median':>9s} {'B median':>9s} {'B/A':>6s}")
    for cfg, cell in sorted({(k[0], k[1]) for k in seen}):
        a, b = seen[(cfg, cell, "A")], seen[(cfg, cell, "B")]
        if a and b:
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"{cfg[0]}x{cfg[1]:<5d} {cell[0]:7s} {cell[1]:9s} {ma:9.2f} {mb:9.2f} {mb / ma:6.2f}")


if __name__ == "__main__":
    main()
