#!/usr/bin/python3
"""run_matrix.py - the distributed benchmark over every configuration, several times.

    cd build && python3 ../bench/dist/run_matrix.py [--runs 3] [--configs 1x1,1x2,2x1,2x2]
        [--reps 5] [--seconds 0.3] [--sizes 4K,64K,1M,16M,64M]

Runs `kvstore-launch -n W -s S -- bench/dist/dist_bench ...` for each configuration, `--runs`
times in rounds (every configuration once per round, so slow phases of a shared machine hit
all of them), prints each run's table as dist_bench printed it, then one Markdown table of
the per-cell medians of the runs' ratios (store / raw ZeroMQ in the same topology) with the
smallest and largest run in brackets.
Run from the build directory (it uses tools/kvstore-launch and bench/dist/dist_bench there).
"""

import argparse
import statistics
import sys

import dist_table

COLUMNS = ("push", "pull", "pushpull", "push / acked")


def parse(out):
    """{size: (push, pull, pushpull, push-against-acked ratios)} from dist_bench's table."""
    return {size: tuple(float(cols[i][1]) for i in (2, 3, 4, 7))
            for size, cols in dist_table.worker0_rows(out).items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--configs", default="1x1,1x2,2x1,2x2")
    p.add_argument("--reps", default="5")
    p.add_argument("--seconds", default="0.3")
    p.add_argument("--sizes", default="4K,64K,1M,16M,64M")
    a = p.parse_args()
    configs = [tuple(int(x) for x in c.split("x")) for c in a.configs.split(",")]
    results = {c: [] for c in configs}
    for run in range(a.runs):
        for w, s in configs:
            # Open jobs, as every figure in docs/PERFORMANCE.md was measured (kvstore-launch
            # secures a job by default; secure_ab.py measures what that costs).
            out = dist_table.run_job(w, s, ["KVSTORE_JOB_SECRET="],
                                     ["--seconds", a.seconds, "--reps", a.reps, "--sizes", a.sizes])
            print("=== run %d W=%d S=%d" % (run + 1, w, s))
            for line in out.splitlines():
                if line.startswith("[worker 0]"):
                    print(line.split("] ", 1)[1])
            sys.stdout.flush()
            results[(w, s)].append(parse(out))
    print("\n| W x S | size | push / one-way | pull / get | pushpull / echo | push / acked |")
    print("|---|---|---|---|---|---|")
    for (w, s), runs in results.items():
        for size in runs[0]:
            cells = []
            for col in range(len(COLUMNS)):
                vals = [r[size][col] for r in runs if size in r]
                cells.append("%.2f [%.2f-%.2f]" % (statistics.median(vals), min(vals), max(vals)))
            print("| %d x %d | %s | %s |" % (w, s, size, " | ".join(cells)))


if __name__ == "__main__":
    main()
