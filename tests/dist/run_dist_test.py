#!/usr/bin/python3
"""Drives one distributed test case through kvstore-launch (standard library only).

    run_dist_test.py LAUNCHER CASE [options] -- program args...

CASE:
  run          launch -n W -s S; require exit 0 and one "PASS" line per worker
  alive        like run, and no node may have been declared dead ("considered dead" in the
               log): for jobs run with a short heartbeat timeout while their nodes are busy
  determinism  run twice; require both runs to pass and rank 0's result files to be
               byte-identical (the program itself checks against the rank-order sum)
  killed       launch with --keep-going; require every surviving worker to print
               SURVIVOR_OK naming the --victim ("worker 2", "server 1", "scheduler"), the
               surviving scheduler and servers to fail RunServer naming it, and the whole
               job to end within --max-sec
  garbage      like run, with PORT/TEST_SERVER_PORT set to a free port for the one server
  spread       like run, with PS_VERBOSE=1: every server must listen on min(W, 4) ports (one
               per ZeroMQ I/O thread) and worker r must connect to port r mod that count of
               every server, so that workers' streams are received on distinct threads
  launcher-fail  a worker exits 3: the launcher must return 3 and stop the rest quickly
  bench        run bench/dist/dist_bench (its --sizes list in the command): require exit 0
               and, from worker 0, one table row per size whose throughputs and ratios
               are all finite and positive (raw ZeroMQ sinks, ports shared through the
               store, split placement: the benchmark itself works)
  scheduler-bind  the scheduler (cmd: kvstore-server) listens only where it was told to: a
               root URI that is not an address of this host is refused at once, naming the
               address and KVSTORE_SCHEDULER_BIND (it used to listen on every interface);
               "localhost" listens on loopback only; KVSTORE_SCHEDULER_BIND=* listens
               everywhere and says so; a 1 x 1 job with root URI "localhost" passes
  ssh-dry-run  check the ssh command construction: placement, the job's variables, and the
               script each remote shell reads, run here by /bin/sh with an empty
               environment: arguments and values with quotes, blanks, $ and newlines arrive
               byte for byte
  ssh          real jobs over ssh: a private sshd on a free loopback port (own host and
               client keys, nothing outside a temporary directory is touched), launched
               with --launcher ssh --ssh-cmd 'ssh -F CONFIG'. LAUNCHER must be the copy
               next to kvstore-server (the build tree's). First every role runs an
               environment check (--same-cmd): each forwarded variable of the caller's
               environment reaches every role byte for byte, and an unlisted one does not
               reach remote roles. Then -n W -s S with no --server-cmd, the caller's
               environment holding PS_VERBOSE=1 and KVSTORE_IO_THREADS=2: the servers must
               run kvstore-server (cmd refuses any role but worker), log two listening
               ports, and every worker must PASS. Exits 77 (skipped) without /usr/sbin/sshd.
Every launch is bounded by --max-sec; a hang is a failure.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def launch(a, extra, cmd, keep_going=False, root_uri=None):
    argv = [sys.executable, a.launcher, "-n", str(a.workers), "-s", str(a.servers)]
    if root_uri:
        argv += ["--root-uri", root_uri]
    for e in a.env + extra:
        argv += ["--env", e]
    if a.server_cmd:
        argv += ["--server-cmd", a.server_cmd]
    else:
        argv += ["--same-cmd"]
    if keep_going:
        argv.append("--keep-going")
    argv += ["--"] + cmd
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=a.max_sec)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace")
        sys.stdout.write(out)
        raise SystemExit("FAIL: the job did not finish within %.0f s" % a.max_sec)
    out = p.stdout.decode(errors="replace")
    sys.stdout.write(out)
    return p.returncode, out, time.monotonic() - t0


def expect_pass(a, rc, out):
    if rc != 0:
        raise SystemExit("FAIL: launcher exit status %d" % rc)
    passes = len(re.findall(r"^\[worker \d+\] PASS ", out, re.M))
    if passes != a.workers:
        raise SystemExit("FAIL: %d of %d workers printed PASS" % (passes, a.workers))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("launcher")
    p.add_argument("case")
    p.add_argument("-n", "--workers", type=int, default=2)
    p.add_argument("-s", "--servers", type=int, default=1)
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--server-cmd")
    p.add_argument("--max-sec", type=float, default=60)
    p.add_argument("--victim", default="worker 2")
    argv = sys.argv[1:]
    cmd = []
    if "--" in argv:
        cut = argv.index("--")
        argv, cmd = argv[:cut], argv[cut + 1:]
    a = p.parse_args(argv)

    if a.case == "run":
        rc, out, _ = launch(a, [], cmd)
        expect_pass(a, rc, out)
    elif a.case == "alive":
        # As "run", and no node may have been declared dead (the job is run with a short
        # heartbeat timeout while its nodes are busy).
        rc, out, _ = launch(a, [], cmd)
        expect_pass(a, rc, out)
        if "considered dead" in out:
            raise SystemExit("FAIL: a node was declared dead while it was busy")
    elif a.case == "garbage":
        port = free_port()
        # Open job: the garbage comes from an outsider's socket, which a job with a secret
        # refuses at the handshake (run_security_test.py forge), so it would never reach the
        # decoder this case tests.
        rc, out, _ = launch(a, ["KVSTORE_JOB_SECRET=", "PORT=%d" % port,
                                "TEST_SERVER_PORT=%d" % port], cmd)
        expect_pass(a, rc, out)
        if "dropped a malformed message" not in out:
            raise SystemExit("FAIL: the server logged no dropped message")
    elif a.case == "spread":
        rc, out, _ = launch(a, ["PS_VERBOSE=1"], cmd)
        expect_pass(a, rc, out)
        want = min(a.workers, 4)
        ports = {}
        for srv, plist, nw in re.findall(r"^\[server (\d+)\] .*serving on [^:]+:([\d,]+) for (\d+) workers",
                                         out, re.M):
            ports[int(srv)] = [int(x) for x in plist.split(",")]
            if int(nw) != a.workers:
                raise SystemExit("FAIL: server %s serves %s workers, want %d" % (srv, nw, a.workers))
            if len(ports[int(srv)]) != want or len(set(ports[int(srv)])) != want:
                raise SystemExit("FAIL: server %s listens on %s, want %d distinct ports" % (srv, plist, want))
        if sorted(ports) != list(range(a.servers)):
            raise SystemExit("FAIL: listening ports logged for servers %s" % sorted(ports))
        for w in range(a.workers):
            for srv in range(a.servers):
                expect = ports[srv][w % want]
                if not re.search(r"^\[worker %d\] .*connected to server %d at tcp://[^:]+:%d$" % (w, srv, expect),
                                 out, re.M):
                    raise SystemExit("FAIL: worker %d did not connect to port %d of server %d" % (w, expect, srv))
        print("every worker used its own port (and I/O thread) on every server")
    elif a.case == "determinism":
        with tempfile.TemporaryDirectory() as d:
            files = []
            for run in range(2):
                f = os.path.join(d, "run%d.bin" % run)
                rc, out, _ = launch(a, [], [x.replace("@OUT@", f) for x in cmd])
                expect_pass(a, rc, out)
                files.append(open(f, "rb").read())
            if not files[0] or files[0] != files[1]:
                raise SystemExit("FAIL: the two runs produced different bytes")
            print("identical: %d bytes" % len(files[0]))
    elif a.case == "killed":
        # --victim "worker 2" or "server 1": every worker but the victim must report it.
        rc, out, took = launch(a, [], cmd, keep_going=True)
        role, _, vrank = a.victim.partition(" ")
        survivors = [w for w in range(a.workers) if not (role == "worker" and w == int(vrank))]
        for w in survivors:
            if not re.search(r"^\[worker %d\] SURVIVOR_OK .*%s" % (w, a.victim), out, re.M):
                raise SystemExit("FAIL: worker %d did not report the death of %s" % (w, a.victim))
        # Every surviving scheduler and server fails too, naming the victim (a job that
        # lost a node did not finish as it should).
        others = ([] if role == "scheduler" else ["scheduler"]) + [
            "server %d" % s for s in range(a.servers) if not (role == "server" and s == int(vrank))]
        for o in others:
            if not re.search(r"^\[%s\] RunServer: KV_ERR_\w+: .*%s" % (o, a.victim), out, re.M):
                raise SystemExit("FAIL: %s did not fail naming %s" % (o, a.victim))
        if rc == 0:
            raise SystemExit("FAIL: the launcher reported success for a job with a killed node")
        print("all survivors failed cleanly; job took %.1f s" % took)
    elif a.case == "no-scheduler":
        # A worker whose scheduler never answers fails within KVSTORE_TIMEOUT_SEC, naming it.
        env = dict(os.environ, DMLC_ROLE="worker", DMLC_PS_ROOT_URI="127.0.0.1",
                   DMLC_PS_ROOT_PORT=str(free_port()), DMLC_NUM_WORKER="1",
                   DMLC_NUM_SERVER="1", KVSTORE_TIMEOUT_SEC="1")
        t0 = time.monotonic()
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=a.max_sec)
        out = p.stdout.decode(errors="replace")
        sys.stdout.write(out)
        took = time.monotonic() - t0
        if p.returncode == 0 or "KV_ERR_TIMEOUT" not in out or "no node table" not in out:
            raise SystemExit("FAIL: expected a TIMEOUT naming the scheduler")
        if took > 10:
            raise SystemExit("FAIL: took %.1f s with a 1 s timeout" % took)
    elif a.case == "launcher-fail":
        t0 = time.monotonic()
        argv = [sys.executable, a.launcher, "-n", "3", "-s", "1", "--same-cmd", "--grace", "1",
                "--", "sh", "-c",
                'if [ "$DMLC_ROLE" = worker ] && [ "$DMLC_WORKER_ID" = 1 ]; then '
                'echo about to fail; exit 3; fi; echo "$DMLC_ROLE up"; sleep 30']
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=a.max_sec)
        out = p.stdout.decode()
        sys.stdout.write(out)
        took = time.monotonic() - t0
        if p.returncode != 3:
            raise SystemExit("FAIL: launcher returned %d, expected 3" % p.returncode)
        if "[worker 1] about to fail" not in out:
            raise SystemExit("FAIL: output is not prefixed with role and rank")
        if took > 15:
            raise SystemExit("FAIL: stopping the job took %.1f s" % took)
    elif a.case == "bench":
        rc, out, _ = launch(a, [], cmd)
        if rc != 0:
            raise SystemExit("FAIL: launcher exit status %d" % rc)
        sizes = cmd[cmd.index("--sizes") + 1].split(",")
        rows = re.findall(r"^\[worker 0\] (\d+ [KM]iB) *\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|",
                          out, re.M)
        if len(rows) != len(sizes):
            raise SystemExit("FAIL: %d table rows for %d sizes" % (len(rows), len(sizes)))
        for row in rows:
            figures = [float(x) for cell in row[1:] for x in cell.split()]
            if len(figures) != 9 or not all(0 < f < float("inf") for f in figures):
                raise SystemExit("FAIL: row %r has a missing, zero or non-finite figure" % (row,))
        print("bench table: %d rows, every figure finite and positive" % len(rows))
    elif a.case == "scheduler-bind":
        scheduler_bind(a, cmd)
    elif a.case == "ssh-dry-run":
        ssh_dry_run(a)
    elif a.case == "ssh":
        run_over_ssh(a, cmd)
    else:
        raise SystemExit("unknown case %s" % a.case)
    print("OK %s" % a.case)


def accepts(host, port):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def scheduler_bind(a, cmd):
    """--server-cmd: the scheduler program (kvstore-server); cmd: the workers' program."""
    def start(uri, port, extra):
        env = dict(os.environ)
        env.pop("KVSTORE_SCHEDULER_BIND", None)
        env.update(DMLC_ROLE="scheduler", DMLC_PS_ROOT_URI=uri, DMLC_PS_ROOT_PORT=str(port),
                   DMLC_NUM_WORKER="1", DMLC_NUM_SERVER="1", KVSTORE_TIMEOUT_SEC="20", **extra)
        return subprocess.Popen(shlex.split(a.server_cmd), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)

    def listening(p, host, port):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and p.poll() is None:
            if accepts(host, port):
                return True
            time.sleep(0.1)
        return False

    def finish(p):
        if p.poll() is None:
            p.kill()
        out = p.communicate()[0].decode(errors="replace")
        sys.stdout.write(out)
        return out

    # An address that is not this host's (TEST-NET-3), checked.
    foreign = "203.0.113.77"
    probe = socket.socket()
    try:
        probe.bind((foreign, 0))
        raise SystemExit("FAIL: %s is an address of this host; pick another" % foreign)
    except OSError:
        pass
    finally:
        probe.close()
    # This host's address on its default route (no packet is sent), if it has one.
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.connect((foreign, 9))
        outside = u.getsockname()[0]
    except OSError:
        outside = None
    finally:
        u.close()
    if outside is not None and outside.startswith("127."):
        outside = None

    # 1. Not an address of this host: refused at once, naming it and the opt-in.
    port = free_port()
    t0 = time.monotonic()
    p = start(foreign, port, {})
    was_listening = listening(p, "127.0.0.1", port)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    out = finish(p)
    if was_listening:
        raise SystemExit("FAIL: with DMLC_PS_ROOT_URI=%s the scheduler listened on 127.0.0.1" % foreign)
    if p.returncode == 0 or time.monotonic() - t0 > 10:
        raise SystemExit("FAIL: the scheduler did not refuse DMLC_PS_ROOT_URI=%s at once" % foreign)
    for frag in ("DMLC_PS_ROOT_URI=%s" % foreign, "KVSTORE_SCHEDULER_BIND", ":%d" % port):
        if frag not in out:
            raise SystemExit("FAIL: the error does not name %s" % frag)

    # 2. "localhost": loopback only.
    port = free_port()
    p = start("localhost", port, {})
    ok = listening(p, "127.0.0.1", port)
    exposed = outside is not None and accepts(outside, port)
    finish(p)
    if not ok:
        raise SystemExit("FAIL: with DMLC_PS_ROOT_URI=localhost nothing listened on 127.0.0.1")
    if exposed:
        raise SystemExit("FAIL: with DMLC_PS_ROOT_URI=localhost the scheduler listened on %s" % outside)
    print("localhost: listening on 127.0.0.1%s" %
          (", not on %s" % outside if outside else " (no other address to check)"))

    # 3. The opt-in: every interface, logged.
    port = free_port()
    p = start(foreign, port, {"KVSTORE_SCHEDULER_BIND": "*"})
    ok = listening(p, "127.0.0.1", port)
    out = finish(p)
    if not ok or "listening on every interface" not in out:
        raise SystemExit("FAIL: KVSTORE_SCHEDULER_BIND=* did not listen everywhere, or said nothing")

    # 4. A job whose root URI is "localhost".
    rc, out, _ = launch(a, [], cmd, root_uri="localhost")
    expect_pass(a, rc, out)


# Values that a remote shell must pass through unchanged.
TRICKY = "a b  'c' \"d\" $e `f` \\g ; h | i * ~ \nj\u00e9"
# Caller variables the launcher forwards over ssh (a sample of each kind), with test values.
FORWARDED_SAMPLE = {
    "LD_LIBRARY_PATH": "/nonexistent/l d:/x'y", "PYTHONPATH": "/nonexistent/p y",
    "CLASSPATH": "/nonexistent/c.jar", "PERL5LIB": "/nonexistent/p'l", "OMP_NUM_THREADS": "3",
    "DMLC_INTERFACE": "lo", "KVSTORE_TEST_FORWARDED": TRICKY, "MXNET_TEST_FORWARDED": "m x",
}
# An environment checker for every role: forwarded variables equal, UNLISTED absent remotely.
ENV_CHECK = r"""
import json, os, sys
want = json.loads(sys.argv[1])
role = os.environ.get("DMLC_ROLE", "?")
bad = [k for k, v in want.items() if os.environ.get(k) != v]
if role != "scheduler" and "LAUNCH_TEST_UNLISTED" in os.environ:
    bad.append("LAUNCH_TEST_UNLISTED (not forwarded, yet present)")
print("ENV_%s %s %s" % ("BAD" if bad else "OK", role, " ".join(bad)))
sys.exit(1 if bad else 0)
"""


def ssh_dry_run(a):
    with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as hf:
        hf.write("# hosts\nnode-a\nuser@node-b  # second\n")
    args = ["--lr", "0.1 x", TRICKY, ""]
    prog = "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ.get('KVSTORE_T')]))"
    try:
        argv = [sys.executable, a.launcher, "-n", "2", "-s", "1", "--launcher", "ssh",
                "-H", hf.name, "--root-uri", "10.0.0.1", "--port", "9100", "--dry-run",
                "--env", "KVSTORE_TIMEOUT_SEC=5", "--env", "KVSTORE_T=" + TRICKY,
                "--same-cmd", "--", sys.executable, "-c", prog] + args
        out = subprocess.run(argv, stdout=subprocess.PIPE, check=True,
                             timeout=a.max_sec).stdout.decode()
    finally:
        os.unlink(hf.name)
    sys.stdout.write(out)
    # One line per process; a value with a newline continues the line.
    lines = dict(re.findall(r"^(scheduler|server \d+|worker \d+): (.*?)(?=^(?:scheduler|server \d+|worker \d+): |\Z)",
                            out, re.M | re.S))
    want = {
        "server 0": ("node-a", "DMLC_ROLE=server", "DMLC_SERVER_ID=0"),
        "worker 0": ("user@node-b", "DMLC_ROLE=worker", "DMLC_WORKER_ID=0"),
        "worker 1": ("node-a", "DMLC_ROLE=worker", "DMLC_WORKER_ID=1"),
    }
    for label, (host, role, rid) in want.items():
        words = shlex.split(lines.get(label, ""))
        tail = ["|", "ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", host,
                "exec /bin/sh -s"]
        if len(words) != 3 + len(tail) or words[:2] != ["printf", "%s\\n"] or words[3:] != tail:
            raise SystemExit("FAIL: %s: %r" % (label, words))
        script = words[2]
        for frag in (role, rid, "DMLC_PS_ROOT_URI=10.0.0.1", "DMLC_PS_ROOT_PORT=9100",
                     "DMLC_NUM_WORKER=2", "DMLC_NUM_SERVER=1", "KVSTORE_TIMEOUT_SEC=5"):
            if "export " + frag not in script:
                raise SystemExit("FAIL: %s lacks %s: %s" % (label, frag, script))
        # What the remote shell does with it (here, with nothing inherited).
        r = subprocess.run(["env", "-i", "/bin/sh", "-s"], input=(script + "\n").encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=a.max_sec)
        got = r.stdout.decode(errors="replace").strip()
        if r.returncode != 0 or got != json.dumps([args, TRICKY]):
            raise SystemExit("FAIL: %s: the script gave %r, want %r" % (label, got, json.dumps([args, TRICKY])))
    if not lines.get("scheduler", "").startswith("env "):
        raise SystemExit("FAIL: the scheduler must run locally: %s" % lines.get("scheduler"))
    print("every remote script passes arguments and values through unchanged")


def run_over_ssh(a, cmd):
    sshd = "/usr/sbin/sshd"
    if not os.access(sshd, os.X_OK):
        print("SKIP: %s is not installed (Debian package openssh-server)" % sshd)
        raise SystemExit(77)
    tmp = tempfile.mkdtemp(prefix="kvstore-ssh-")
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        os.path.join(tmp, name)], check=True)
    with open(os.path.join(tmp, "client_key.pub")) as f, \
            open(os.path.join(tmp, "authorized_keys"), "w") as out:
        out.write(f.read())
    port = free_port()
    with open(os.path.join(tmp, "sshd_config"), "w") as f:
        f.write("Port %d\nListenAddress 127.0.0.1\nHostKey %s/host_key\n"
                "AuthorizedKeysFile %s/authorized_keys\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                "UsePAM no\nStrictModes no\nPidFile %s/sshd.pid\n" % (port, tmp, tmp, tmp))
    with open(os.path.join(tmp, "ssh_config"), "w") as f:
        f.write("Host 127.0.0.1\n  Port %d\n  IdentityFile %s/client_key\n"
                "  IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n"
                "  LogLevel ERROR\n"
                % (port, tmp))
    with open(os.path.join(tmp, "hosts"), "w") as f:
        f.write("127.0.0.1\n")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation dir
    daemon = subprocess.Popen([sshd, "-D", "-e", "-f", os.path.join(tmp, "sshd_config")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        ssh_cmd = "ssh -F %s" % os.path.join(tmp, "ssh_config")
        deadline = time.monotonic() + 10
        while subprocess.run(shlex.split(ssh_cmd) + ["-o", "BatchMode=yes", "127.0.0.1", "true"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
            if daemon.poll() is not None or time.monotonic() > deadline:
                out = daemon.communicate()[0].decode(errors="replace") if daemon.poll() is not None else ""
                raise SystemExit("FAIL: the test sshd did not accept a login: %s" % out)
            time.sleep(0.2)
        if not os.access(os.path.join(os.path.dirname(os.path.abspath(a.launcher)),
                                      "kvstore-server"), os.X_OK):
            raise SystemExit("FAIL: %s has no kvstore-server next to it" % a.launcher)
        base = [sys.executable, a.launcher, "-n", str(a.workers), "-s", str(a.servers),
                "--launcher", "ssh", "-H", os.path.join(tmp, "hosts"), "--ssh-cmd", ssh_cmd,
                "--root-uri", "127.0.0.1"]

        def run(extra_argv, env):
            try:
                p = subprocess.run(base + extra_argv, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=a.max_sec)
            except subprocess.TimeoutExpired as e:
                sys.stdout.write((e.stdout or b"").decode(errors="replace"))
                raise SystemExit("FAIL: the ssh job did not finish within %.0f s" % a.max_sec)
            out = p.stdout.decode(errors="replace")
            sys.stdout.write(out)
            return p.returncode, out

        # 1. The caller's environment reaches every role (the scheduler runs here).
        env = dict(os.environ, LAUNCH_TEST_UNLISTED="1", **FORWARDED_SAMPLE)
        rc, out = run(["--same-cmd", "--", sys.executable, "-c", ENV_CHECK,
                       json.dumps(FORWARDED_SAMPLE)], env)
        oks = re.findall(r"^\[(scheduler|server \d+|worker \d+)\] ENV_OK ", out, re.M)
        if rc != 0 or len(oks) != 1 + a.servers + a.workers:
            raise SystemExit("FAIL: the caller's environment did not reach every role "
                             "(%d of %d checks passed)" % (len(oks), 1 + a.servers + a.workers))

        # 2. A job: kvstore-server by default for the servers; the caller's PS_VERBOSE and
        # KVSTORE_IO_THREADS reach them (two listening ports each, logged).
        env = dict(os.environ, PS_VERBOSE="1", KVSTORE_IO_THREADS="2", DMLC_INTERFACE="lo")
        worker_only = ['/bin/sh', '-c', 'if [ "$DMLC_ROLE" != worker ]; then '
                       'echo "the user command started as $DMLC_ROLE"; exit 9; fi; exec "$0" "$@"']
        extra = []
        for e in a.env:
            extra += ["--env", e]
        rc, out = run(extra + ["--"] + worker_only + cmd, env)
        expect_pass(a, rc, out)
        served = re.findall(r"^\[server (\d+)\] .*serving on [^:]+:(\d+),(\d+) for", out, re.M)
        if sorted(int(s) for s, _, _ in served) != list(range(a.servers)):
            raise SystemExit("FAIL: servers that logged two listening ports: %s" % served)
        for w in range(a.workers):
            if not re.search(r"^\[worker %d\] .*connected to server 0 at" % w, out, re.M):
                raise SystemExit("FAIL: worker %d did not log its connections (PS_VERBOSE)" % w)
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=5)
        except subprocess.TimeoutExpired:
            daemon.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
