#!/usr/bin/python3
"""secure_ab.py - what job authentication costs: dist_bench with and without a job secret,
interleaved and repeated in one session.

    cd build && python3 ../bench/dist/secure_ab.py [--rounds 3] [--configs 1x1,2x2]
        [--sizes 4K,64K,1M,16M] [--seconds 0.2] [--reps 3]

Each round runs `kvstore-launch -n W -s S -- bench/dist/dist_bench ...` once open
(--env KVSTORE_JOB_SECRET=, the plain ZeroMQ transport) and once secured (the fresh job secret
kvstore-launch generates: CURVE on every connection), the order alternating between rounds so
that neither always runs first. dist_bench's raw ZeroMQ columns never use CURVE, so they show
the machine's state during each run. Prints, per configuration and size, the medians over the
rounds of the store's GB/s (push, pull, pushpull) and latencies (us) open and secured, and
the median of the per-round ratios secured / open (1.00: no cost; for latencies > 1 is slower).
Run from the build directory (it uses tools/kvstore-launch and bench/dist/dist_bench there).
Last, it times libsodium's crypto_secretbox (XSalsa20-Poly1305, the cipher CurveZMQ applies to
every message) on 16 MiB in this process: the bound on one secured connection's throughput.
"""

import argparse
import ctypes
import ctypes.util
import statistics
import sys
import time

import dist_table

FIELDS = ("push", "pull", "pushpull", "pushL", "pullL")


def run(w, s, secured, a):
    """{size: {field: value}} from worker 0's dist_bench table (latencies None when absent)."""
    env = [] if secured else ["KVSTORE_JOB_SECRET="]
    out = dist_table.run_job(w, s, env, ["--seconds", a.seconds, "--reps", a.reps,
                                         "--sizes", a.sizes])
    rows = {}
    for size, cols in dist_table.worker0_rows(out).items():
        lat = cols[5]
        rows[size] = {
            "push": float(cols[2][0]), "pull": float(cols[3][0]), "pushpull": float(cols[4][0]),
            "pushL": float(lat[0]) if lat and lat[0] != "-" else None,
            "pullL": float(lat[1]) if len(lat) > 1 and lat[1] != "-" else None,
        }
    return rows


def cipher_speed(nbytes=16 << 20, reps=5):
    """Best-of-reps GB/s of crypto_secretbox_easy and crypto_secretbox_open_easy."""
    path = ctypes.util.find_library("sodium")
    if not path:
        return None
    na = ctypes.CDLL(path)
    if na.sodium_init() < 0:
        return None
    key, nonce = ctypes.create_string_buffer(32), ctypes.create_string_buffer(24)
    msg = ctypes.create_string_buffer(nbytes)
    box = ctypes.create_string_buffer(nbytes + 16)
    n = ctypes.c_ulonglong(nbytes)
    seal, opened = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        na.crypto_secretbox_easy(box, msg, n, nonce, key)
        seal.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        if na.crypto_secretbox_open_easy(msg, box, ctypes.c_ulonglong(nbytes + 16), nonce, key) != 0:
            return None
        opened.append(time.perf_counter() - t0)
    return nbytes / min(seal) / 1e9, nbytes / min(opened) / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--configs", default="1x1,2x2")
    p.add_argument("--sizes", default="4K,64K,1M,16M")
    p.add_argument("--seconds", default="0.2")
    p.add_argument("--reps", default="3")
    a = p.parse_args()
    configs = [tuple(int(x) for x in c.split("x")) for c in a.configs.split(",")]
    res = {(c, sec): [] for c in configs for sec in (False, True)}
    for r in range(a.rounds):
        for c in configs:
            for secured in ((False, True) if r % 2 == 0 else (True, False)):
                rows = run(c[0], c[1], secured, a)
                res[(c, secured)].append(rows)
                print("round %d %dx%d %s: %s" % (r + 1, c[0], c[1], "secured" if secured else "open",
                      "; ".join("%s push %.2f pull %.2f pspl %.2f" % (k, v["push"], v["pull"], v["pushpull"])
                                for k, v in rows.items())))
                sys.stdout.flush()
    print("\n| W x S | size | push GB/s open / secured | pull GB/s | pushpull GB/s | push latency us | pull latency us |")
    print("|---|---|---|---|---|---|---|")
    for c in configs:
        opens, secs = res[(c, False)], res[(c, True)]
        for size in opens[0]:
            cells = []
            for f in FIELDS:
                o = [x[size][f] for x in opens if x[size][f] is not None]
                s = [x[size][f] for x in secs if x[size][f] is not None]
                if not o or not s:
                    cells.append("-")
                    continue
                ratios = [sv / ov for ov, sv in zip(o, s) if ov > 0]
                cells.append("%.2f / %.2f (x%.2f)" % (statistics.median(o), statistics.median(s),
                                                       statistics.median(ratios)))
            print("| %d x %d | %s | %s |" % (c[0], c[1], size, " | ".join(cells)))
    speed = cipher_speed()
    if speed:
        print("\nlibsodium crypto_secretbox on 16 MiB: seal %.2f GB/s, open %.2f GB/s" % speed)


if __name__ == "__main__":
    main()
