#!/usr/bin/python3
"""thread_cpu.py - per-thread CPU time, context switches and minor page faults of running
processes, sampled from /proc over an interval (standard library only).

    python3 bench/dist/thread_cpu.py SECONDS PATTERN [PATTERN ...]
    python3 bench/dist/thread_cpu.py --totals SECONDS PATTERN [PATTERN ...]

Every thread of every process whose command line contains one of the PATTERNs (e.g.
`dist_bench kvstore-server`) is read twice, SECONDS apart; threads that used at least 1% of
a CPU are printed with user and system CPU in % of one CPU, voluntary and involuntary
context switches per second and minor page faults per second. Run it repeatedly while a
benchmark runs to see which phase uses what (docs/perf-log/2026-11-22-dist.md, "Where the
time goes").

With --totals the threads are read every 0.2 s for up to SECONDS (or until no matching
process is left), and each thread's last reading is printed: CPU seconds and minor page
faults since it started. Started next to a whole benchmark run, this gives what each thread
spent on the run (the benchmark moves the same bytes through the store and through raw
ZeroMQ, so the store's threads and the raw peers' threads can be compared directly).
"""

import os
import sys
import time


def snapshot(patterns):
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            cmd = open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode()
            if not any(p in cmd for p in patterns):
                continue
            for tid in os.listdir("/proc/%s/task" % pid):
                base = "/proc/%s/task/%s/" % (pid, tid)
                stat = open(base + "stat").read()
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                f = stat[stat.rindex(")") + 2:].split()
                status = dict(line.split(":", 1) for line in open(base + "status") if ":" in line)
                out[(pid, tid)] = (cmd[:40], comm, int(f[11]), int(f[12]), int(f[7]),
                                   int(status["voluntary_ctxt_switches"]),
                                   int(status["nonvoluntary_ctxt_switches"]))
        except (OSError, ValueError, KeyError):
            continue  # the process or thread ended meanwhile
    return out


def totals(seconds, patterns, hz):
    last = {}
    end = time.time() + seconds
    while time.time() < end:
        now = snapshot(patterns)
        if not now and last:
            break
        last.update(now)
        time.sleep(0.2)
    print("%7s %7s %-30s %-16s %8s %10s" % ("pid", "tid", "command", "thread", "cpu_s", "minflt"))
    for key in sorted(last):
        cmd, comm, ut, st, mf, _, _ = last[key]
        if (ut + st) / hz < 0.01:
            continue
        print("%7s %7s %-30s %-16s %8.2f %10d" % (key[0], key[1], cmd[:30], comm, (ut + st) / hz, mf))


def main():
    args = sys.argv[1:]
    cumulative = bool(args) and args[0] == "--totals"
    if cumulative:
        args = args[1:]
    if len(args) < 2:
        raise SystemExit(__doc__)
    seconds, patterns = float(args[0]), args[1:]
    hz = os.sysconf("SC_CLK_TCK")
    if cumulative:
        totals(seconds, patterns, hz)
        return
    a = snapshot(patterns)
    time.sleep(seconds)
    b = snapshot(patterns)
    print("%7s %7s %-30s %-16s %6s %6s %8s %8s %9s" % ("pid", "tid", "command", "thread", "usr%",
                                                       "sys%", "vcs/s", "nvcs/s", "minflt/s"))
    for key in sorted(b):
        if key not in a:
            continue
        cmd, comm, ut, st, mf, vcs, nvcs = b[key]
        _, _, ut0, st0, mf0, vcs0, nvcs0 = a[key]
        usr, sys_ = 100.0 * (ut - ut0) / hz / seconds, 100.0 * (st - st0) / hz / seconds
        if usr + sys_ < 1.0:
            continue
        print("%7s %7s %-30s %-16s %6.1f %6.1f %8.0f %8.0f %9.0f" % (
            key[0], key[1], cmd[:30], comm, usr, sys_, (vcs - vcs0) / seconds,
            (nvcs - nvcs0) / seconds, (mf - mf0) / seconds))


if __name__ == "__main__":
    main()
