"""Closing a store or an array while a library call on it runs (issue 10, defect 3).

ctypes releases the GIL for every library call, so another thread can run close() while a
push is inside the library, and an updater can call close() on its own store. The rule:
close() of a store with a call running raises BusyError and leaves the store open and
usable; close() of an array that a running call was given takes effect when the call
returns. Nothing is ever freed under a running call (run this file with an ASan build of
libkvstore and the ASan runtime preloaded to see that directly; see bindings/python/README.md).
"""
import threading
import time
import weakref

import numpy
import pytest

import kvstore
from kvstore import kv, nd

SHAPE = (64, 64)
WAIT = 30  # seconds; every wait is bounded so a regression fails instead of hanging
# kvstore.BusyError, looked up by name so that this file also runs (and fails, instead of
# not loading) against a library older than KV_ERR_BUSY.
BusyError = kvstore.errors.error_class("BUSY")


def assert_holds(store, key, value):
    """The store's value of key is SHAPE filled with value."""
    out = nd.zeros(SHAPE)
    store.pull(key, out=out)
    numpy.testing.assert_array_equal(out.asnumpy(), numpy.full(SHAPE, value, numpy.float32))


class Gate(object):
    """An updater that stops inside the push on key `hold` until released, which keeps the
    push running inside the library for as long as the test needs."""

    def __init__(self, hold):
        self.hold = hold
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, key, input, stored):
        if key == self.hold:
            self.entered.set()
            assert self.release.wait(WAIT)
        stored += input


def start(target):
    errors = []

    def run():
        try:
            target()
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    return t, errors


def test_store_close_from_another_thread_during_push_is_busy():
    s = kv.create("local")
    s.init(3, nd.ones(SHAPE))
    gate = Gate(3)
    s._set_updater(gate)
    t, errors = start(lambda: s.push(3, nd.ones(SHAPE) * 2))
    try:
        assert gate.entered.wait(WAIT)
        with pytest.raises(BusyError) as info:
            s.close()
        assert not s.closed
        assert info.value.code == -19 and info.value.name == "KV_ERR_BUSY"
    finally:
        gate.release.set()
        t.join(WAIT)
    assert not t.is_alive() and errors == []
    # The push completed on the intact store, which stays usable, and closes normally.
    assert_holds(s, 3, 3)
    s.push(3, nd.ones(SHAPE))
    assert_holds(s, 3, 4)
    s.close()
    assert s.closed


def test_store_close_from_its_own_updater_is_busy():
    s = kv.create("local")
    s.init([1, 2], [nd.ones(SHAPE), nd.ones(SHAPE)])
    seen = []

    def updater(key, input, stored):
        try:
            s.close()
            seen.append("closed")
        except BusyError as exc:
            seen.append(exc.name)
        stored += input

    s._set_updater(updater)
    s.push([1, 2], [nd.ones(SHAPE), nd.ones(SHAPE) * 5])
    assert seen == ["KV_ERR_BUSY", "KV_ERR_BUSY"] and not s.closed
    assert_holds(s, 1, 2)
    assert_holds(s, 2, 6)

    # An updater that lets the BusyError escape fails its push like any updater exception:
    # the exception reaches the caller and the stored value is unchanged.
    s._set_updater(lambda key, input, stored: s.close())
    with pytest.raises(BusyError):
        s.push(1, nd.ones(SHAPE))
    assert_holds(s, 1, 2)
    s.close()
    assert s.closed


def test_array_close_during_a_call_frees_it_when_the_call_returns():
    s = kv.create("local")
    s.init([1, 2], [nd.zeros(SHAPE), nd.zeros(SHAPE)])
    gate = Gate(1)
    s._set_updater(gate)
    value = nd.ones(SHAPE) * 7  # the value of key 2, pushed after key 1's updater
    held = weakref.ref(value._h)
    t, errors = start(lambda: s.push([1, 2], [nd.ones(SHAPE), value]))
    try:
        assert gate.entered.wait(WAIT)
        value.close()
        assert value.closed
        with pytest.raises(ValueError, match="closed NDArray"):
            value.asnumpy()
        assert held() is not None, "the array was freed while the push that uses it ran"
    finally:
        gate.release.set()
        t.join(WAIT)
    assert not t.is_alive() and errors == []
    assert held() is None, "the closed array was not freed when the push returned"
    assert_holds(s, 2, 7)
    s.close()


def test_array_close_from_an_updater_during_pull_into_it():
    """The outputs of a call are held the same way (pushpull: push, updater, then pull)."""
    s = kv.create("local")
    s.init(1, nd.ones(SHAPE))
    out = nd.zeros(SHAPE)
    held = weakref.ref(out._h)
    alive_after_close = []

    def updater(key, input, stored):
        out.close()
        alive_after_close.append(held() is not None)
        stored += input

    s._set_updater(updater)
    s.pushpull(1, nd.ones(SHAPE) * 2, out=out)
    assert alive_after_close == [True], "the output was freed before the pull into it"
    assert out.closed and held() is None
    assert_holds(s, 1, 3)
    s.close()


def test_close_racing_with_pushes_on_other_threads():
    """close() in a loop against threads that push: each close() either raises BusyError
    or releases the store when no call is running; a push after that fails with ValueError
    (closed), never inside a freed store. Under ASan this also covers the window between a
    push reading the handle and entering the library."""
    closed_early = 0
    for _ in range(20):
        s = kv.create("local")
        s.init(0, nd.zeros((16,)))
        s._set_updater(lambda key, input, stored: stored.__iadd__(input))
        one = nd.ones((16,))

        def pusher():
            for i in range(200):
                try:
                    s.push(0, one)
                except ValueError as exc:
                    assert "closed KVStore" in str(exc)
                    return
                if i % 4 == 0:
                    time.sleep(0)  # lets close() in between calls, not only during them

        threads = [start(pusher) for _ in range(2)]
        deadline = time.monotonic() + WAIT
        while not s.closed and time.monotonic() < deadline:
            try:
                s.close()
            except BusyError:
                time.sleep(0.0002)
        closed_early += any(t.is_alive() for t, _ in threads)
        for t, errors in threads:
            t.join(WAIT)
            assert not t.is_alive() and errors == []
        assert s.closed
    assert closed_early > 0, "no close() happened while pushes ran: the race was not exercised"
