#!/usr/bin/python3
"""shm_ab.py - co-located peers through shared memory against TCP loopback: dist_bench with
KVSTORE_SHM=1 and KVSTORE_SHM=0, interleaved and repeated in one session.

    cd build && python3 ../bench/dist/shm_ab.py [--rounds 3] [--configs 1x1,2x2]
        [--sizes 1M,16M,64M] [--seconds 0.3] [--reps 3] [--open] [--floor 2,3,4]

Each round runs `kvstore-launch -n W -s S -- bench/dist/dist_bench ...` once with shared
memory (the default) and once with KVSTORE_SHM=0 (every payload over TCP loopback), the order
alternating between rounds. Jobs carry kvstore-launch's fresh job secret (CURVE on every
connection) unless --open (KVSTORE_JOB_SECRET=, plain ZeroMQ). Each dist_bench run also
measures one memcpy of the value in the worker (its memcpy column) right next to its pushpull
batches. Prints, per configuration and size, the medians over the rounds of pushpull GB/s
(both directions counted, dist_bench's convention) with and without shared memory, the median
per-round ratio shm / tcp, and the medians of pspl / memcpy of each (the memory baseline of
that run). Run from the build directory.

--floor C1,C2,... adds, in every round, bench/dist/shm_floor (no store: two processes, one
shared mapping, only the copies of a design of C copies per round) at the same sizes, once
with the worker's copies on one thread and once split over two (--split), and prints per
design the median of its pushpull GB/s over the store's TCP GB/s of the same round: what
shared memory of that design could reach against this TCP path here.
"""

import argparse
import statistics
import subprocess
import sys

import dist_table


def run(w, s, shm, a):
    """{size: {"pushpull": GB/s, "memcpy": GB/s}} from worker 0's dist_bench table."""
    env = ["KVSTORE_SHM=%d" % (1 if shm else 0)] + (["KVSTORE_JOB_SECRET="] if a.open else [])
    out = dist_table.run_job(w, s, env, ["--seconds", a.seconds, "--reps", a.reps,
                                         "--sizes", a.sizes, "--ops", "pushpull"])
    return {size: {"pushpull": float(cols[4][0]), "memcpy": float(cols[8][0])}
            for size, cols in dist_table.worker0_rows(out, min_columns=9).items()}


def floor(a):
    """{(size, copies, split): GB/s} from one shm_floor run per thread layout at the job's
    sizes (one repetition each)."""
    res = {}
    for split in (False, True):
        out = subprocess.run(["bench/dist/shm_floor", "--sizes", a.sizes, "--copies", a.floor,
                              "--seconds", a.seconds, "--reps", "1"] + (["--split"] if split else []),
                             stdout=subprocess.PIPE, check=True, timeout=600).stdout.decode()
        for line in out.splitlines()[1:]:
            cols = line.replace("|", " ").split()
            res[(cols[0], int(cols[1]), split)] = float(cols[2])
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--configs", default="1x1,2x2")
    p.add_argument("--sizes", default="1M,16M,64M")
    p.add_argument("--seconds", default="0.3")
    p.add_argument("--reps", default="3")
    p.add_argument("--open", action="store_true", help="no job secret (plain ZeroMQ)")
    p.add_argument("--floor", default="", help="shm_floor designs (copies per round) to add")
    a = p.parse_args()
    print("shm_ab: %d rounds, %s job, dist_bench --ops pushpull --seconds %s --reps %s" %
          (a.rounds, "open" if a.open else "secured", a.seconds, a.reps))
    print("%-6s %-7s| %-7s %-7s %-6s| %-7s %-7s" % ("job", "size", "shm", "tcp", "x", "shm/mc", "tcp/mc"))
    for cfg in a.configs.split(","):
        w, s = (int(x) for x in cfg.split("x"))
        res = {True: [], False: []}
        floors = []
        for r in range(a.rounds):
            for shm in ((True, False) if r % 2 == 0 else (False, True)):
                res[shm].append(run(w, s, shm, a))
            if a.floor:
                floors.append(floor(a))
        for size in res[True][0]:
            pp = {m: [x[size]["pushpull"] for x in res[m]] for m in res}
            mc = {m: [x[size]["pushpull"] / x[size]["memcpy"] for x in res[m]] for m in res}
            ratio = [pp[True][i] / pp[False][i] for i in range(a.rounds)]
            print("%-6s %-7s| %-7.2f %-7.2f %-6.2f| %-7.2f %-7.2f" %
                  (cfg, size, statistics.median(pp[True]), statistics.median(pp[False]),
                   statistics.median(ratio), statistics.median(mc[True]), statistics.median(mc[False])))
            key = size.replace(" MiB", "M").replace(" KiB", "K")
            for c in (int(x) for x in a.floor.split(",")) if a.floor else ():
                for split in (False, True):
                    fl = [floors[i][(key, c, split)] / pp[False][i] for i in range(a.rounds)]
                    print("%-6s %-7s| floor, %d copies, %s: %.2f GB/s, %.2fx tcp (rounds %s)" %
                          (cfg, size, c, "worker on 2 threads" if split else "worker on 1 thread",
                           statistics.median(f[(key, c, split)] for f in floors),
                           statistics.median(fl), " ".join("%.2f" % x for x in fl)))
            sys.stdout.flush()
    print("GB/s per worker of pushpull (both directions); x = median of per-round shm / tcp; "
          "/mc = pushpull GB/s over the memcpy GB/s measured in the same dist_bench run")


if __name__ == "__main__":
    main()
