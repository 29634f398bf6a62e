#!/usr/bin/python3
"""Fault injection: kill -9 one node of a 2 x 2 dist_sync job at a random time, repeatedly.

    run_faults.py LAUNCHER PROGRAM [--trials-per-role N] [--seed S] [--timeout SEC]

Each trial launches `kvstore-launch -n 2 -s 2 --keep-going -- PROGRAM faults` (the
dist_worker test program: every role writes its pid into a fresh directory, the workers run
rounds of push + pull and check every pulled value against the exact round sum), waits until
training has started, sleeps a random 0-1 s, and kills one victim with SIGKILL: a worker, a
server or the scheduler, in turn, the rank drawn at random. A trial passes when

  - the whole job ends within --max-sec (no hang);
  - no worker printed STALE (a pull that succeeded without the worker's own push);
  - every surviving worker failed (FAULT_DETECTED) no earlier than the kill and within
    KVSTORE_TIMEOUT_SEC of it, with an error naming the victim ("worker 1", "server 0",
    "the scheduler"), and its KVStoreFree returned within KVSTORE_TIMEOUT_SEC + 5 s;
  - the surviving scheduler and servers failed KVStoreRunServer naming the victim.

Prints one line per trial and a summary "faults: N injected (...), H hangs, S stale
successes, F other failures"; exits 1 when any trial failed. Standard library only.
"""

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

WORKERS, SERVERS = 2, 2


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("launcher")
    p.add_argument("program")
    p.add_argument("--trials-per-role", type=int, default=3)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--timeout", type=float, default=10.0, help="KVSTORE_TIMEOUT_SEC of the job")
    p.add_argument("--max-sec", type=float, default=60.0, help="a trial running longer hangs")
    p.add_argument("--verbose", action="store_true", help="print every trial's output")
    return p.parse_args()


def wait_for(pred, limit):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return False


def run_trial(a, rng, role):
    """Returns (verdict, detail, output); verdict is 'ok', 'hang', 'stale' or 'fail'."""
    rank = rng.randrange(WORKERS if role == "worker" else SERVERS) if role != "scheduler" else None
    victim = role if rank is None else "%s %d" % (role, rank)
    pid_name = "scheduler.pid" if rank is None else "%s-%d.pid" % (role, rank)
    named = "scheduler" if rank is None else victim
    with tempfile.TemporaryDirectory(prefix="kvstore-faults-") as d:
        env = dict(os.environ)
        argv = [sys.executable, a.launcher, "-n", str(WORKERS), "-s", str(SERVERS), "--same-cmd",
                "--keep-going",
                "--env", "KVSTORE_TIMEOUT_SEC=%g" % a.timeout,
                "--env", "KVSTORE_HEARTBEAT_INTERVAL_SEC=0.2",
                "--env", "KVSTORE_HEARTBEAT_TIMEOUT_SEC=2",
                "--env", "KVSTORE_FAULT_DIR=" + d,
                "--", a.program, "faults"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        chunks = []
        reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
        reader.start()
        t_start = time.monotonic()
        pids = ["scheduler.pid"] + ["server-%d.pid" % s for s in range(SERVERS)] + \
               ["worker-%d.pid" % w for w in range(WORKERS)]
        started = wait_for(lambda: os.path.exists(os.path.join(d, "training")) and
                           all(os.path.exists(os.path.join(d, f)) for f in pids), a.max_sec / 2)
        t_kill = None
        if started:
            time.sleep(rng.uniform(0.0, 1.0))
            with open(os.path.join(d, pid_name)) as f:
                pid = int(f.read())
            t_kill = time.time()
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        left = a.max_sec - (time.monotonic() - t_start)
        try:
            proc.wait(timeout=max(left, 1))
            hung = False
        except subprocess.TimeoutExpired:
            hung = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=5)
        out = b"".join(c for c in chunks if c).decode(errors="replace")
    if hung:
        return "hang", "the job did not end within %.0f s" % a.max_sec, victim, out
    if not started:
        return "fail", "training never started", victim, out
    if re.search(r"^\[worker \d+\] STALE", out, re.M):
        return "stale", "a pull succeeded without the worker's own push", victim, out
    problems = []
    for w in range(WORKERS):
        if role == "worker" and w == rank:
            continue
        m = re.search(r"^\[worker %d\] FAULT_DETECTED rank %d t=([\d.]+) round \d+ rc=(\w+) msg=(.*)$"
                      % (w, w), out, re.M)
        if not m:
            problems.append("worker %d reported no failure" % w)
            continue
        t, rc, msg = float(m.group(1)), m.group(2), m.group(3)
        if rc == "KV_OK":
            problems.append("worker %d finished every round without noticing" % w)
        elif t < t_kill - 0.05:
            problems.append("worker %d failed before the kill: %s %s" % (w, rc, msg))
        elif t - t_kill > a.timeout:
            problems.append("worker %d failed %.1f s after the kill (timeout %g s)" % (w, t - t_kill, a.timeout))
        elif named not in msg:
            problems.append("worker %d's error does not name %s: %s %s" % (w, victim, rc, msg))
        f = re.search(r"^\[worker %d\] FREE rank %d after ([\d.]+) s" % (w, w), out, re.M)
        if not f:
            problems.append("worker %d: KVStoreFree did not return" % w)
        elif float(f.group(1)) > a.timeout + 5.0:
            # (A survivor's last pushes to a healthy server may wait for a round its partner
            # never joins: that wait ends with the round timeout.)
            problems.append("worker %d: KVStoreFree took %s s" % (w, f.group(1)))
    others = ([] if role == "scheduler" else ["scheduler"]) + \
             ["server %d" % s for s in range(SERVERS) if not (role == "server" and s == rank)]
    for o in others:
        if not re.search(r"^\[%s\] RunServer: KV_ERR_\w+: .*%s" % (o, named), out, re.M):
            problems.append("%s did not fail naming %s" % (o, victim))
    if problems:
        return "fail", "; ".join(problems), victim, out
    return "ok", "", victim, out


def main():
    a = parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print("run_faults: seed %d, %d trials per role, timeout %g s" % (seed, a.trials_per_role, a.timeout))
    counts = {"worker": 0, "server": 0, "scheduler": 0}
    verdicts = {"ok": 0, "hang": 0, "stale": 0, "fail": 0}
    for i in range(a.trials_per_role):
        for role in ("worker", "server", "scheduler"):
            t0 = time.monotonic()
            verdict, detail, victim, out = run_trial(a, rng, role)
            counts[role] += 1
            verdicts[verdict] += 1
            print("trial %d: killed %s: %s%s (%.1f s)" % (i, victim, verdict.upper(),
                                                        ": " + detail if detail else "",
                                                        time.monotonic() - t0))
            if verdict != "ok" or a.verbose:
                sys.stdout.write(out)
            sys.stdout.flush()
    total = sum(counts.values())
    print("faults: %d injected (worker %d, server %d, scheduler %d), %d hangs, %d stale successes, "
          "%d other failures" % (total, counts["worker"], counts["server"], counts["scheduler"],
                                 verdicts["hang"], verdicts["stale"], verdicts["fail"]))
    return 0 if verdicts["ok"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
