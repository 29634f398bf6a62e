#!/usr/bin/python3
"""shm_ab.py - co-located peers through shared memory against TCP loopback: dist_bench with
KVSTORE_SHM=1 and KVSTORE_SHM=0, interleaved and repeated in one session.

    cd build && python3 ../bench/dist/shm_ab.py [--rounds 3] [--configs 1x1,2x2]
        [--sizes 1M,16M,64M] [--seconds 0.3] [--reps 3] [--open] [--chunk BYTES]

Each round runs `kvstore-launch -n W -s S -- bench/dist/dist_bench ...` once with shared
memory (the default) and once with KVSTORE_SHM=0 (every payload over TCP loopback), the order
alternating between rounds. Jobs carry kvstore-launch's fresh job secret (CURVE on every
connection) unless --open (KVSTORE_JOB_SECRET=, plain ZeroMQ). Each dist_bench run also
measures one memcpy of the value in the worker (its memcpy column) right next to its pushpull
batches. Prints, per configuration and size, the medians over the rounds of pushpull GB/s
(both directions counted, dist_bench's convention) with and without shared memory, the median
per-round ratio shm / tcp, and the medians of pspl / memcpy of each (the memory baseline of
that run). With --chunk BYTES each round also runs shared memory with chunked payloads
(KVSTORE_SHM_CHUNK_BYTES=BYTES, src/ps/shm.h "Chunks"; the three runs' order rotates between
rounds) and prints its median GB/s, its per-round ratios against TCP and against whole
payloads (chk/shm), and its pspl / memcpy. Run from the build directory.
"""

import argparse
import statistics
import sys

import dist_table


def run(w, s, shm, a):
    """{size: {"pushpull": GB/s, "memcpy": GB/s}} from worker 0's dist_bench table; shm is
    False (TCP), True (whole payloads) or "chunk" (KVSTORE_SHM_CHUNK_BYTES=--chunk)."""
    env = ["KVSTORE_SHM=%d" % (1 if shm else 0)] + (["KVSTORE_JOB_SECRET="] if a.open else [])
    env += ["KVSTORE_SHM_CHUNK_BYTES=%s" % (a.chunk if shm == "chunk" else "0")]
    out = dist_table.run_job(w, s, env, ["--seconds", a.seconds, "--reps", a.reps,
                                         "--sizes", a.sizes, "--ops", "pushpull"])
    return {size: {"pushpull": float(cols[4][0]), "memcpy": float(cols[8][0])}
            for size, cols in dist_table.worker0_rows(out, min_columns=9).items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--configs", default="1x1,2x2")
    p.add_argument("--sizes", default="1M,16M,64M")
    p.add_argument("--seconds", default="0.3")
    p.add_argument("--reps", default="3")
    p.add_argument("--open", action="store_true", help="no job secret (plain ZeroMQ)")
    p.add_argument("--chunk", default="", help="also run chunked payloads of this many bytes")
    a = p.parse_args()
    print("shm_ab: %d rounds, %s job, dist_bench --ops pushpull --seconds %s --reps %s%s" %
          (a.rounds, "open" if a.open else "secured", a.seconds, a.reps,
           ", chunks of %s bytes" % a.chunk if a.chunk else ""))
    kinds = [True, False] + (["chunk"] if a.chunk else [])
    chk_head = "| %-7s %-6s %-7s %-6s" % ("chk", "x", "chk/shm", "chk/mc") if a.chunk else ""
    print("%-6s %-7s| %-7s %-7s %-6s| %-7s %-7s%s" % ("job", "size", "shm", "tcp", "x", "shm/mc", "tcp/mc", chk_head))
    med = statistics.median
    for cfg in a.configs.split(","):
        w, s = (int(x) for x in cfg.split("x"))
        res = {k: [] for k in kinds}
        for r in range(a.rounds):
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
            for shm in (order if r % 2 == 0 else order[::-1]):
                res[shm].append(run(w, s, shm, a))
        for size in res[True][0]:
            pp = {m: [x[size]["pushpull"] for x in res[m]] for m in res}
            mc = {m: [x[size]["pushpull"] / x[size]["memcpy"] for x in res[m]] for m in res}
            ratio = [pp[True][i] / pp[False][i] for i in range(a.rounds)]
            chk = ""
            if a.chunk:
                chk = "| %-7.2f %-6.2f %-7.2f %-6.2f" % (
                    med(pp["chunk"]), med([pp["chunk"][i] / pp[False][i] for i in range(a.rounds)]),
                    med([pp["chunk"][i] / pp[True][i] for i in range(a.rounds)]), med(mc["chunk"]))
            print("%-6s %-7s| %-7.2f %-7.2f %-6.2f| %-7.2f %-7.2f%s" %
                  (cfg, size, med(pp[True]), med(pp[False]), med(ratio), med(mc[True]), med(mc[False]), chk))
            sys.stdout.flush()
    print("GB/s per worker of pushpull (both directions); x = median of per-round shm / tcp; "
          "/mc = pushpull GB/s over the memcpy GB/s measured in the same dist_bench run" +
          ("; chk = shared memory with chunked payloads, its x against tcp, chk/shm against whole "
           "payloads (medians of per-round ratios)" if a.chunk else ""))


if __name__ == "__main__":
    main()
