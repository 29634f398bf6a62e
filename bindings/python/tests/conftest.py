"""Shared fixtures of the kvstore Python binding tests.

ctest runs this suite with KVSTORE_LIBRARY=<built libkvstore> and PYTHONPATH=bindings/python.
Run by hand from a checkout, the package is taken from bindings/python and, when
KVSTORE_LIBRARY is unset, the library from build/ or build-py/.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)                      # bindings/python
REPO_ROOT = os.path.dirname(os.path.dirname(PACKAGE_ROOT))  # the repository

if PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, PACKAGE_ROOT)

if not os.environ.get("KVSTORE_LIBRARY"):
    # Only the conventional build directories: others may hold sanitizer builds, which
    # cannot be loaded into an uninstrumented interpreter.
    for cand in (os.path.join(REPO_ROOT, d, "libkvstore.so.0") for d in ("build", "build-py")):
        if os.path.isfile(cand):
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


def _sanitized():
    with open("/proc/self/maps") as f:
        return any(("libasan" in line or "libtsan" in line) for line in f)


#: True when a sanitizer runtime is loaded (a KVSTORE_SANITIZE build): its allocator keeps
#: freed memory in quarantine, so resident-memory bounds do not apply.
SANITIZED = _sanitized()


def assert_rss_growth_below(growth_kib, bound_kib, what):
    if SANITIZED:
        pytest.skip("resident-memory bounds do not apply under a sanitizer "
                    "(%s grew %d KiB)" % (what, growth_kib))
    assert growth_kib < bound_kib, "RSS grew by %d KiB (bound %d KiB) over %s" % (
        growth_kib, bound_kib, what)


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
