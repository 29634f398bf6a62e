#!/usr/bin/python3
"""Authentication and resource-bound cases of the distributed store (standard library only).

    run_security_test.py LAUNCHER CASE --server-cmd SERVER -- DIST_FORGE

CASE:
  forge    A job with a secret (2 workers, 1 server on a known port) whose server starts 2 s
           late. Before it registers, two outsiders reach the scheduler: `dist_forge register`
           (no credentials, claims to be a server) and a real kvstore-server holding a WRONG
           secret. Inside the job, worker 0 forges INIT, PUSH (every worker rank), SET_OPTIMIZER,
           COMMAND and PULL to the server from three outsider sockets (dist_forge forge).
           Requires: the job passes with exact values; the REGISTER forger got no answer; the
           wrong-secret server failed (TIMEOUT) and was logged as refused by the scheduler;
           the server logged the refused connections (rate-limited: at most 5 full lines).
  bounds   An open job (2 workers, 1 server, KVSTORE_MAX_MESSAGE_BYTES=2 MiB): worker 0 declares
           oversized frames (dist_forge bounds checks that the nodes hang up), inits a key above
           the bound (refused, naming the variable), and floods the scheduler and the server with
           3000 malformed messages each. Requires: the job passes; each node logged at most 5
           "dropped" lines in full and a count line that accounts for all 3000.
  bad-secret-file  A secret file readable by its group is refused naming the file; one that
           only its owner reads runs the job; both variables at once are refused.
Every launch is bounded; a hang is a failure.
"""

import os
import re
import secrets
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_dist_test import free_port  # noqa: E402  (the driver next to this one)

MAX_SEC = 90


def launch(launcher, workers, servers, env, server_cmd, cmd, port=None):
    argv = [sys.executable, launcher, "-n", str(workers), "-s", str(servers),
            "--server-cmd", server_cmd]
    if port:
        argv += ["--port", str(port)]
    for kv in env:
        argv += ["--env", kv]
    argv += ["--"] + cmd
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=MAX_SEC)
    out = p.stdout.decode(errors="replace")
    sys.stdout.write(out)
    return p.returncode, out


def expect_pass(rc, out, workers):
    if rc != 0:
        raise SystemExit("FAIL: launcher exit status %d" % rc)
    passes = len(re.findall(r"^\[worker \d+\] PASS ", out, re.M))
    if passes != workers:
        raise SystemExit("FAIL: %d of %d workers printed PASS" % (passes, workers))


def lines_of(out, label, pattern):
    return [l for l in out.splitlines() if l.startswith("[%s] " % label) and re.search(pattern, l)]


def case_forge(launcher, server_cmd, forge):
    port, server_port = free_port(), free_port()
    secret = secrets.token_hex(32)
    job = ["DMLC_PS_ROOT_URI=127.0.0.1", "DMLC_PS_ROOT_PORT=%d" % port, "DMLC_NUM_WORKER=2",
           "DMLC_NUM_SERVER=1"]
    # The outsiders start first and keep trying until the scheduler listens.
    reg = subprocess.Popen([forge, "register", "127.0.0.1", str(port), "8"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    env = dict(os.environ, DMLC_ROLE="server", KVSTORE_TIMEOUT_SEC="6",
               KVSTORE_JOB_SECRET=secrets.token_hex(32))
    env.update(kv.split("=", 1) for kv in job)
    intruder = subprocess.Popen([server_cmd], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
    delayed = ("/bin/sh -c 'if [ \"$DMLC_ROLE\" = server ]; then sleep 2; fi; exec \"$0\" \"$@\"' "
               "%s forge" % forge)
    rc, out = launch(launcher, 2, 1,
                     ["KVSTORE_JOB_SECRET=" + secret, "KVSTORE_TIMEOUT_SEC=30",
                      "KVSTORE_HEARTBEAT_INTERVAL_SEC=0.25", "KVSTORE_HEARTBEAT_TIMEOUT_SEC=10",
                      "PORT=%d" % server_port, "TEST_SERVER_PORT=%d" % server_port],
                     delayed, [forge, "forge"], port=port)
    reg_out = reg.communicate(timeout=MAX_SEC)[0].decode(errors="replace")
    int_out = intruder.communicate(timeout=MAX_SEC)[0].decode(errors="replace")
    sys.stdout.write("--- register forger:\n%s--- wrong-secret server:\n%s" % (reg_out, int_out))
    expect_pass(rc, out, 2)
    if reg.returncode != 0:
        raise SystemExit("FAIL: the forged REGISTER was answered")
    if intruder.returncode == 0 or "KV_ERR_TIMEOUT" not in int_out:
        raise SystemExit("FAIL: the server with the wrong secret was not refused")
    refused = lines_of(out, "scheduler", r"refused a connection")
    if not refused:
        raise SystemExit("FAIL: the scheduler logged no refused connection")
    for label in ("scheduler", "server 0"):
        full = lines_of(out, label, r"refused a connection") 
        full = [l for l in full if "more refused connections" not in l]
        if len(full) > 5:
            raise SystemExit("FAIL: %s logged %d refusals in full (at most 5)" % (label, len(full)))
    if not lines_of(out, "server 0", r"refused a connection"):
        raise SystemExit("FAIL: the server logged no refused connection")
    if "FORGED" in out:
        raise SystemExit("FAIL: a forged message was acted on")


def case_bounds(launcher, server_cmd, forge):
    server_port = free_port()
    bound = 2 << 20
    rc, out = launch(launcher, 2, 1,
                     ["KVSTORE_JOB_SECRET=", "KVSTORE_MAX_MESSAGE_BYTES=%d" % bound,
                      "TEST_MAX_BYTES=%d" % bound, "KVSTORE_TIMEOUT_SEC=30",
                      "PORT=%d" % server_port, "TEST_SERVER_PORT=%d" % server_port],
                     "%s bounds" % forge, [forge, "bounds"])
    expect_pass(rc, out, 2)
    for label in ("scheduler", "server 0"):
        full = [l for l in lines_of(out, label, r"dropped ") if "more dropped messages" not in l]
        if len(full) > 5:
            raise SystemExit("FAIL: %s logged %d dropped messages in full (at most 5)" % (label, len(full)))
        counted = sum(int(m) for l in lines_of(out, label, r"more dropped messages")
                      for m in re.findall(r"(\d+) more dropped messages", l))
        if len(full) + counted < 3000:
            raise SystemExit("FAIL: %s accounted for %d of 3000 dropped messages" % (label, len(full) + counted))


def case_bad_secret_file(launcher, server_cmd, forge):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "secret")
        with open(path, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        os.chmod(path, 0o640)
        worker = os.path.join(os.path.dirname(forge), "dist_worker")
        env = ["KVSTORE_JOB_SECRET_FILE=" + path, "KVSTORE_TIMEOUT_SEC=10"]
        rc, out = launch(launcher, 1, 1, env, server_cmd, [worker, "sync", "1", "int"])
        if rc == 0 or not re.search(r"KVSTORE_JOB_SECRET_FILE=%s can be accessed by its group" % re.escape(path), out):
            raise SystemExit("FAIL: a group-readable secret file was not refused by name")
        os.chmod(path, 0o600)
        rc, out = launch(launcher, 1, 1, env, server_cmd, [worker, "sync", "1", "int"])
        expect_pass(rc, out, 1)
        if "KVSTORE_JOB_SECRET is not set" in out:
            raise SystemExit("FAIL: a job with a secret file warned that it runs open")
        rc, out = launch(launcher, 1, 1, env + ["KVSTORE_JOB_SECRET=" + secrets.token_hex(32)],
                         server_cmd, [worker, "sync", "1", "int"])
        if rc == 0 or "both KVSTORE_JOB_SECRET and KVSTORE_JOB_SECRET_FILE" not in out:
            raise SystemExit("FAIL: both secret variables at once were not refused")


def main():
    argv = sys.argv[1:]
    cut = argv.index("--")
    opts, cmd = argv[:cut], argv[cut + 1:]
    launcher, case = opts[0], opts[1]
    server_cmd = opts[opts.index("--server-cmd") + 1]
    t0 = time.monotonic()
    {"forge": case_forge, "bounds": case_bounds,
     "bad-secret-file": case_bad_secret_file}[case](launcher, server_cmd, cmd[0])
    print("OK %s (%.1f s)" % (case, time.monotonic() - t0))


if __name__ == "__main__":
    main()
