"""The binding in a distributed job (when the library has the dist stores): a scheduler, a
server with a Python updater and controller, and two workers, all on the loopback."""
import os
import socket
import subprocess
import sys

import pytest

import kvstore
from conftest import HERE, subprocess_env

pytestmark = pytest.mark.skipif(not kvstore.has_feature("dist"),
                                reason="libkvstore built without the distributed stores")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dist_sync_with_python_updater_and_controller(tmp_path):
    env = subprocess_env()
    env.update({"DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(free_port()),
                "DMLC_NUM_WORKER": "2", "DMLC_NUM_SERVER": "1", "KVSTORE_TIMEOUT_SEC": "30",
                "DMLC_INTERFACE": "lo"})
    procs = {}
    for name, role in (("scheduler", "scheduler"), ("server", "server"),
                       ("worker0", "worker"), ("worker1", "worker")):
        log = open(str(tmp_path / (name + ".log")), "w+")
        procs[name] = (subprocess.Popen([sys.executable, os.path.join(HERE, "dist_node.py")],
                                        env=dict(env, DMLC_ROLE=role), stdout=log,
                                        stderr=subprocess.STDOUT), log)
    out = {}
    try:
        for name, (proc, log) in procs.items():
            rc = proc.wait(timeout=90)
            log.seek(0)
            out[name] = log.read()
            assert rc == 0, "%s exited %d:\n%s" % (name, rc, out[name])
    finally:
        for proc, log in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    ranks = set()
    for w in ("worker0", "worker1"):
        # The node's own lines; the library's log lines ("[kvstore worker] ...") are not
        # part of this protocol.
        lines = [l for l in out[w].splitlines() if not l.startswith("[kvstore ")]
        rank, num, typ = lines[0].split()[1:]
        ranks.add(int(rank))
        assert (num, typ) == ("2", "dist_sync")
        # init 1, then one sync round: sum of both pushes (1 + 2) merged by the server's
        # Python updater: 1 + 3 * 2
        # nd.waitall() waited for the pull's output and forgot it
        assert lines[1] == "pulled " + str([7.0] * 6) + " pending 1 0"
        assert lines[2] == "command error CallbackError"
        assert lines[-1] == "worker done"
    assert ranks == {0, 1}
    server = out["server"]
    assert server.count("server update 3") == 1  # once per round, on the server thread
    assert "controller 1 hello0" in server and "controller 1 hello1" in server
    assert "ValueError: bad command boom" in server  # the controller's exception is reported
    assert "controller close: KV_ERR_BUSY open" in server  # close() inside RunServer refused
    assert server.rstrip().endswith("server done")
    assert "scheduler done" in out["scheduler"]
