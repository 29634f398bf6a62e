"""kvstore.profiler: the library's profiler (docs/PROFILING.md) from Python.

    >>> from kvstore import profiler
    >>> profiler.start("trace.json")     # or KVSTORE_PROFILE=trace.json in the environment
    >>> ...                              # pushes and pulls
    >>> profiler.stop()                  # writes trace.json (trace.worker0.json on a dist worker)
    >>> profiler.stats()["keys"][0]
    {'key': 3, 'pushes': 2, 'pulls': 1, 'bytes_pushed': 8192, ...}

or, for a block:

    >>> with profiler.profile("trace.json"):
    ...     store.push(3, grad)

The timeline opens in https://ui.perfetto.dev or chrome://tracing. The profiler belongs to
the process, not to a store: it records every store of the process.
"""
import contextlib
import json
from ctypes import byref, c_size_t, create_string_buffer

from ._lib import LIB
from .errors import InvalidArgumentError, check_call

__all__ = ["start", "stop", "stats", "profile"]


def start(path=None):
    """Starts recording: a timeline written to `path` at stop() (None: counters only) and
    the per-key counters of stats(). Raises InvalidArgumentError when it already runs or
    when the folder of `path` is not writable."""
    if path is not None:
        path = str(path)
        if "\0" in path:
            raise ValueError("profile path %r contains a NUL character" % path)
        path = path.encode("utf-8")
    check_call(LIB.KVProfileStart(path))


def stop():
    """Stops recording and writes the timeline, if start() named a path. The counters stay
    readable. Does nothing when the profiler does not run."""
    check_call(LIB.KVProfileStop())


def stats():
    """The per-key counters of the current or last run, as a dict:
    {"node": "worker 0" or "", "running": bool, "keys": [{"key": 3 or "name", "pushes",
    "pulls", "bytes_pushed", "bytes_pulled", "round_waits", "round_wait_us", "reduce_us",
    "applies", "apply_us"}, ...]} (times in microseconds; KVProfileGetStats in kvstore.h
    says what each counts)."""
    size = c_size_t(0)
    while True:
        buf = create_string_buffer(size.value)
        rc = LIB.KVProfileGetStats(buf if size.value else None, size.value, byref(size))
        if rc == 0:
            return json.loads(buf.value.decode("utf-8"))
        try:
            check_call(rc)
        except InvalidArgumentError:
            continue  # the buffer was too small (keys were added meanwhile): size is updated


@contextlib.contextmanager
def profile(path=None):
    """start(path) for the block, stop() at its end (also when it raises)."""
    start(path)
    try:
        yield
    finally:
        stop()
