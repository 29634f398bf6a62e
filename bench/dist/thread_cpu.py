#!/usr/bin/python3
"""thread_cpu.py - per-thread CPU time, context switches and minor page faults of running
processes, sampled from /proc over an interval (standard library only).

    python3 bench/dist/thread_cpu.py SECONDS PATTERN [PATTERN ...]

Every thread of every process whose command line contains one of the PATTERNs (e.g.
`dist_bench kvstore-server`) is read twice, SECONDS apart; threads that used at least 1% of
a CPU are printed with user and system CPU in % of one CPU, voluntary and involuntary
context switches per second and minor page faults per second. Run it repeatedly while a
benchmark runs to see which phase uses what (PERFORMANCE-dist.md, "Where the time goes").
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


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    seconds, patterns = float(sys.argv[1]), sys.argv[2:]
    hz = os.sysconf("SC_CLK_TCK")
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
