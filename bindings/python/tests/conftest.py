"""Shared fixtures of the kvstore Python binding tests.

ctest runs this suite with KVSTORE_LIBRARY=<built libkvstore> and PYTHONPATH=bindings/python.
Run by hand from a checkout, the package is taken from bindings/python and, when
KVSTORE_LIBRARY is unset, the library from the first build*/ directory that has one.
"""
import glob
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)                      # bindings/python
REPO_ROOT = os.path.dirname(os.path.dirname(PACKAGE_ROOT))  # the repository

if PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, PACKAGE_ROOT)

if not os.environ.get("KVSTORE_LIBRARY"):
    for cand in sorted(glob.glob(os.path.join(REPO_ROOT, "build*", "libkvstore.so.0"))):
        os.environ["KVSTORE_LIBRARY"] = cand
        break

import kvstore  # noqa: E402


def pytest_report_header(config):
    return "kvstore %s, library %s (version %s), GPUs: %d" % (
        kvstore.__file__, kvstore.LIBRARY_PATH, kvstore.library_version(), kvstore.num_gpus())


def rss_kib():
    """Resident set size of this process in KiB, from /proc/self/status."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def subprocess_env():
    """Environment for child interpreters: same library, package importable."""
    env = dict(os.environ)
    env["KVSTORE_LIBRARY"] = kvstore.LIBRARY_PATH
    env["PYTHONPATH"] = PACKAGE_ROOT + (os.pathsep + env["PYTHONPATH"]
                                        if env.get("PYTHONPATH") else "")
    return env


@pytest.fixture
def store():
    """A fresh 'local' store, released after the test."""
    with kvstore.kv.create("local") as s:
        yield s


@pytest.fixture
def str_store():
    """A fresh 'local' store meant for string keys."""
    with kvstore.kv.create("local") as s:
        yield s
