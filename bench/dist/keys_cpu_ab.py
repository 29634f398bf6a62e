#!/usr/bin/python3
"""keys_cpu_ab.py - worker and server CPU per key of `dist_bench --keys`, one job per key
count K, for two libkvstore builds interleaved (rounds alternate which goes first); the
servers' side of bench/dist/keys_ab.py, which reads worker 0 only.

  bench/dist/keys_cpu_ab.py --build BUILD --a LIBDIR_A --b LIBDIR_B [--rounds 4] [--config 1x1]
                            [--keys 100,100000] [--reps 5]

BUILD is a build directory of this tree (bench/dist/dist_bench, tools/kvstore-server);
LIBDIR_A and LIBDIR_B hold a libkvstore.so.0 each, loaded by every process of a job through
LD_LIBRARY_PATH. Jobs are open (no CURVE), as keys_ab.py's.

Worker CPU: dist_bench's `cpu us/key` (worker 0's process, its timed calls only). Server
CPU: every server process's CPU time (all its threads, read by wait4 in this script, which
the launcher starts as --server-cmd around kvstore-server), summed over the servers and
divided by the key-calls of the job, W workers x K keys x iters x (reps + 1 warm-up): it
includes the job's setup and its init call of the K keys. Both include time spent spinning
while waiting (KVSTORE_SPIN_US, inherited from this environment). Prints each
round (with the largest server's peak RSS), then per library the medians, the ratio of the
last K to the first (median, and per round) and B/A.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROW = re.compile(r"\[worker 0\] (\d+)\s+(\d+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)")


def wrap(outdir, argv):
    pid = os.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    _, status, ru = os.wait4(pid, 0)
    role = os.environ.get("DMLC_ROLE", "x")
    with open(os.path.join(outdir, "%s-%d" % (role, pid)), "w") as f:
        f.write("%.6f %d\n" % (ru.ru_utime + ru.ru_stime, ru.ru_maxrss))
    sys.exit(os.waitstatus_to_exitcode(status))


def job(a, lib, k):
    w, s = a.config.split("x")
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, LD_LIBRARY_PATH=lib)
        cmd = [sys.executable, os.path.join(a.root, "tools", "kvstore-launch"), "-n", w, "-s", s,
               "--env", "KVSTORE_JOB_SECRET=", "--server-cmd",
               "%s %s --wrap %s %s" % (sys.executable, os.path.abspath(__file__), d,
                                       os.path.join(a.build, "tools", "kvstore-server")),
               "--", os.path.join(a.build, "bench", "dist", "dist_bench"), "--keys", str(k),
               "--reps", str(a.reps)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200).stdout
        m = next((ROW.match(l) for l in out.splitlines() if ROW.match(l)), None)
        if m is None:
            print(out[-2000:])
            raise SystemExit("no result for K=%d" % k)
        iters, cpu = int(m.group(2)), float(m.group(4))
        srv, rss = 0.0, 0
        for f in os.listdir(d):
            if f.startswith("server-"):
                t, kb = open(os.path.join(d, f)).read().split()
                srv += float(t)
                rss = max(rss, int(kb))
        calls = int(w) * k * iters * (a.reps + 1)
        return cpu, srv / calls * 1e6, rss / 1024.0


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--wrap":
        return wrap(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--config", default="1x1")
    ap.add_argument("--keys", default="100,100000")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.root = os.path.normpath(os.path.join(a.build, ".."))
    ks = [int(x) for x in a.keys.split(",")]
    got = {"A": {k: [] for k in ks}, "B": {k: [] for k in ks}}
    for rnd in range(a.rounds):
        sides = [("A", a.a), ("B", a.b)]
        for name, lib in (sides if rnd % 2 == 0 else sides[::-1]):
            for k in ks:
                got[name][k].append(job(a, lib, k))
            load = os.getloadavg()[0]
            print("round %d %s (load %.1f): %s" % (rnd + 1, name, load, "  ".join(
                "K=%d worker %.2f server %.2f (peak RSS %.0f MiB)" % ((k,) + got[name][k][-1]) for k in ks)))
            sys.stdout.flush()
    k0, k1 = ks[0], ks[-1]
    print("%s, us per key, median of %d rounds (per-round ratio K=%d : K=%d in brackets)" % (a.config, a.rounds, k1, k0))
    for name in ("A", "B"):
        for i, what in ((0, "worker cpu"), (1, "server cpu")):
            med = {k: statistics.median(x[i] for x in got[name][k]) for k in ks}
            rr = [got[name][k1][r][i] / got[name][k0][r][i] for r in range(a.rounds)]
            print("%s %s: %s; ratio %.2f (%s)" % (name, what, " ".join("K=%d %.2f" % (k, med[k]) for k in ks),
                                                 med[k1] / med[k0], " ".join("%.2f" % x for x in rr)))
    for i, what in ((0, "worker cpu"), (1, "server cpu")):
        print("B/A %s: %s" % (what, " ".join("K=%d %.2f" % (k, statistics.median(x[i] for x in got["B"][k]) /
                                                             statistics.median(x[i] for x in got["A"][k])) for k in ks)))


if __name__ == "__main__":
    main()
