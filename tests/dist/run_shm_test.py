#!/usr/bin/python3
"""Shared-memory payloads between co-located workers and servers (src/ps/shm.h) in real jobs.

    run_shm_test.py LAUNCHER CASE [-n W] [-s S] [--server-cmd CMD] [--env K=V ...] -- PROGRAM...

CASE:
  on       launch with PS_VERBOSE=1; require exit 0, one "PASS" line per worker, every
           server's acceptance of every worker's segment ("worker w: payloads through shared
           memory"), every worker's "server s: payloads through shared memory" and, at its
           end, a nonzero count of payloads it sent through each server's segment, and a
           nonzero count from every server.
  off      the same with KVSTORE_SHM=0: the job passes, no segment is offered or accepted
           and no payload goes through shared memory.
  faults   PROGRAM is tests/faults/run_faults.py and its arguments (launcher and
           dist_worker); run it with PS_VERBOSE=1 and KVSTORE_TEST_FAULT_LEN (values of
           16 KiB: through shared memory): it must pass (kill -9 of a worker, a server or
           the scheduler mid-round ends with the usual errors, no hang, no stale value) and
           the jobs must have used shared memory.
Every case also requires that no kvstore entry appeared in /dev/shm.
Standard library only.
"""

import os
import re
import subprocess
import sys


def dev_shm():
    try:
        return sorted(e for e in os.listdir("/dev/shm") if "kvstore" in e)
    except OSError:
        return []


def fail(msg, out=""):
    sys.stdout.write(out)
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    argv = sys.argv[1:]
    sep = argv.index("--")
    opts, prog = argv[:sep], argv[sep + 1:]
    launcher, case = opts[0], opts[1]
    rest = opts[2:]
    w = int(rest[rest.index("-n") + 1]) if "-n" in rest else 1
    s = int(rest[rest.index("-s") + 1]) if "-s" in rest else 1
    before = dev_shm()
    env = dict(os.environ)
    env["PS_VERBOSE"] = "1"
    if case == "faults":
        env["KVSTORE_TEST_FAULT_LEN"] = "4096"
        cmd = [sys.executable] + prog + ["--verbose"]
    else:
        cmd = [sys.executable, launcher] + rest
        if case == "off":
            cmd += ["--env", "KVSTORE_SHM=0"]
        cmd += ["--"] + prog
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=600)
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        fail("exit status %d" % proc.returncode, out)
    after = dev_shm()
    if after != before:
        fail("/dev/shm changed: %s -> %s" % (before, after), out)
    if case == "faults":
        used = len(re.findall(r"payloads through shared memory$", out, re.M))
        if used == 0:
            fail("no job of the fault trials used shared memory", out)
        print("PASS: fault trials with shared memory (%d segments accepted), /dev/shm unchanged" % used)
        return
    for r in range(w):
        if not re.search(r"^\[worker %d\] PASS" % r, out, re.M):
            fail("worker %d did not pass" % r, out)
    for r in range(w):
        for v in range(s):
            accepted = re.search(r"^\[server %d\] .*worker %d: payloads through shared memory$" % (v, r), out, re.M)
            told = re.search(r"^\[worker %d\] .*server %d: payloads through shared memory$" % (r, v), out, re.M)
            count = re.search(r"^\[worker %d\] .*server %d: (\d+) payloads sent through shared memory" % (r, v),
                              out, re.M)
            if case == "on":
                if not accepted or not told:
                    fail("worker %d and server %d did not set up shared memory" % (r, v), out)
                if not count or int(count.group(1)) == 0:
                    fail("worker %d sent no payload through server %d's segment" % (r, v), out)
            else:
                if accepted or told or (count and int(count.group(1)) != 0):
                    fail("KVSTORE_SHM=0, yet worker %d and server %d used shared memory" % (r, v), out)
    for v in range(s):
        m = re.search(r"^\[server %d\] .*stopped; (\d+) payloads sent through shared memory" % v, out, re.M)
        if not m:
            fail("server %d printed no count" % v, out)
        if (int(m.group(1)) > 0) != (case == "on"):
            fail("server %d sent %s payloads through shared memory" % (v, m.group(1)), out)
    print("PASS: %s, %d worker(s) x %d server(s), /dev/shm unchanged" % (case, w, s))


if __name__ == "__main__":
    main()
