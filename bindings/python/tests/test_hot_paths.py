"""The hot paths of push, pull and pushpull (kv.py, "hot paths"): the common shapes (one int
key and one NDArray; a list of int keys and a list of as many NDArrays) are passed to the
library without _flatten, and every other shape, or an argument those checks do not accept,
still gets the general path's result or error."""
import numpy
import pytest

import kvstore
from kvstore import kv, nd

SHAPE = (4,)


@pytest.fixture
def store():
    s = kv.create("local")
    yield s
    s.close()


def refuse_general_path(monkeypatch):
    """Makes the general path fail loudly: a call that reaches it is not on a hot path."""
    def refuse(*args, **kwargs):
        raise AssertionError("general path taken")
    monkeypatch.setattr(kv, "_flatten", refuse)


def full(x):
    return numpy.full(SHAPE, x, numpy.float32)


def test_common_shapes_take_the_hot_paths(store, monkeypatch):
    a, b = nd.ones(SHAPE), nd.ones(SHAPE) * 2
    store.init([1, 2, 3], [a, a, a])  # init has no hot path
    refuse_general_path(monkeypatch)

    store.push(1, b)
    out = nd.zeros(SHAPE)
    store.pull(1, out=out)
    numpy.testing.assert_array_equal(out.asnumpy(), full(2))

    store.push([2, 3], (b, b * 3), priority=1.0)
    outs = [nd.zeros(SHAPE), nd.zeros(SHAPE)]
    store.pull((2, 3), out=outs)
    numpy.testing.assert_array_equal(outs[0].asnumpy(), full(2))
    numpy.testing.assert_array_equal(outs[1].asnumpy(), full(6))

    c = a * 5
    store.pushpull(1, c)  # no out: the result lands in the value
    numpy.testing.assert_array_equal(c.asnumpy(), full(5))
    store.pushpull([1, 2], [a * 7, a * 8], out=outs)
    numpy.testing.assert_array_equal(outs[0].asnumpy(), full(7))
    numpy.testing.assert_array_equal(outs[1].asnumpy(), full(8))


def test_hot_path_errors_are_the_library_s(store, monkeypatch):
    refuse_general_path(monkeypatch)
    out = nd.zeros(SHAPE)
    with pytest.raises(kvstore.UnknownKeyError, match="key 9 is not initialised"):
        store.pull(9, out=out)
    with pytest.raises(kvstore.UnknownKeyError):
        store.push([9, 10], [out, out])


def test_shapes_the_hot_paths_refuse_keep_their_errors(store):
    store.init(1, nd.zeros(SHAPE))
    a = nd.ones(SHAPE)
    with pytest.raises(TypeError, match=r"a list of 1 keys needs a list of 1 values"):
        store.push([1], a)
    with pytest.raises(OverflowError, match=r"push \(key 2147483648\): int key 2147483648 is "
                                            r"out of the C int range"):
        store.push(2 ** 31, a)
    with pytest.raises(OverflowError, match="out of the C int range"):
        store.pull([1, -2 ** 31 - 1], out=[a, a])
    with pytest.raises(TypeError, match=r"pull \(key True\): a key must be an int or a str"):
        store.pull(True, out=a)
    with pytest.raises(TypeError, match=r"push \(key True\): a key must be an int or a str"):
        store.push([1, True], [a, a])
    with pytest.raises(TypeError, match=r"push \(key 1\)\[1\]: values must be NDArrays"):
        store.push([1], [[a, "x"]])
    with pytest.raises(TypeError, match=r"pull \(key 1\): outputs must be NDArrays"):
        store.pull([1], out=[None])
    with pytest.raises(ValueError, match="1 keys but 2 values"):
        store.push([1], [a, a])
    closed = nd.ones(SHAPE)
    closed.close()
    with pytest.raises(ValueError, match="operation on a closed NDArray"):
        store.push(1, closed)
    with pytest.raises(ValueError, match="operation on a closed NDArray"):
        store.pull([1, 1], out=[a, closed])
    with pytest.raises(kvstore.KeyKindMismatchError, match="int and string keys mixed"):
        store.push([1, "w"], [a, a])
    numpy.testing.assert_array_equal(a.asnumpy(), full(1))


def test_a_repeated_key_list_is_packed_once_and_still_checked(store, monkeypatch):
    """A list of int keys seen before reuses its packed C ints (kv._INT_KEYS); a list equal to
    it with a key of another type (1.0 == 1, True == 1), or the same list object changed in
    place, is still checked and packed for what it holds now."""
    store.init([1, 2, 3], [nd.zeros(SHAPE)] * 3)
    a, b = nd.ones(SHAPE), nd.ones(SHAPE) * 2
    keys = [1, 2]
    store.push(keys, [a, b])
    assert kv._INT_KEYS[(1, 2)] == numpy.array([1, 2], numpy.intc).tobytes()
    with pytest.raises(TypeError, match=r"push \(key 1.0\): a key must be an int or a str"):
        store.push([1.0, 2], [b, a])
    with pytest.raises(TypeError, match=r"push \(key True\): a key must be an int or a str"):
        store.push([True, 2], [b, a])
    keys[1] = 3
    refuse_general_path(monkeypatch)
    store.push(keys, [b, b * 3])
    outs = [nd.zeros(SHAPE) for _ in range(3)]
    store.pull([1, 2, 3], out=outs)
    for out, want in zip(outs, (2, 2, 6)):
        numpy.testing.assert_array_equal(out.asnumpy(), full(want))


def test_a_repeated_list_of_arrays_is_packed_once_and_stays_correct(store):
    """A list of NDArrays passed twice is recorded (ndarray._PACKED) and then reuses its packed
    handles; closing an array of it, another list of other arrays, or a changed list never
    reuses stale handles, and arrays only the record holds are released."""
    import gc
    import weakref
    from kvstore import ndarray
    store.init([1, 2], [nd.zeros(SHAPE)] * 2)
    vals = [nd.ones(SHAPE), nd.ones(SHAPE) * 2]
    store.push([1, 2], vals)
    store.push([1, 2], vals)
    assert tuple(vals) in ndarray._PACKED
    outs = [nd.zeros(SHAPE), nd.zeros(SHAPE)]
    store.pull([1, 2], out=outs)
    store.pull([1, 2], out=outs)
    numpy.testing.assert_array_equal(outs[1].asnumpy(), full(2))
    vals[1] = nd.ones(SHAPE) * 5  # the list changed in place: another tuple
    store.push([1, 2], vals)
    store.pull([2, 1], out=outs)
    numpy.testing.assert_array_equal(outs[0].asnumpy(), full(5))
    vals[0].close()  # a recorded array closed: the records go, the call refuses it
    assert not ndarray._PACKED
    with pytest.raises(ValueError, match="operation on a closed NDArray"):
        store.push([1, 2], vals)
    # Arrays the caller dropped are released when the next list is recorded.
    dropped = [nd.ones(SHAPE), nd.ones(SHAPE)]
    store.push([1, 2], dropped)
    store.push([1, 2], dropped)
    gone = weakref.ref(dropped[0])
    del dropped
    gc.collect()
    other = [nd.ones(SHAPE), nd.ones(SHAPE)]
    store.push([1, 2], other)
    store.push([1, 2], other)
    assert gone() is None
    assert tuple(other) in ndarray._PACKED


def test_an_array_closed_while_its_list_is_recorded_is_refused(store, monkeypatch):
    """close() on another thread between the call reading a list's handles and recording the
    list (forced here by closing from inside the recording) leaves no record that would let
    a later call use the closed array."""
    from kvstore import ndarray
    store.init([2, 3], [nd.zeros(SHAPE)] * 2)
    c, d = nd.ones(SHAPE), nd.ones(SHAPE)
    store.push([2, 3], [c, d])  # first sight of the list
    record = kv._remember_packed

    def closing_meanwhile(*args):
        c.close()
        return record(*args)

    monkeypatch.setattr(kv, "_remember_packed", closing_meanwhile)
    store.push([2, 3], [c, d])  # recorded: the call itself holds c's handle until it returns
    monkeypatch.setattr(kv, "_remember_packed", record)
    assert c.closed
    assert not any(c in k for k in ndarray._PACKED)
    with pytest.raises(ValueError, match="operation on a closed NDArray"):
        store.push([2, 3], [c, d])


def test_a_list_recorded_while_another_thread_clears_the_table_is_still_cleared_by_close(
        store, monkeypatch):
    """Thread B clears the recorded lists (any close() or store close does) while thread A
    records a list: A's list must not outlive the clear half-known (in the table, its ids
    gone), or a close() of one of its arrays would clear nothing and a later call would use
    the closed array. B is held in the middle of its clear until A has recorded (or 0.5 s)."""
    import threading
    from kvstore import ndarray
    store.init([2, 3], [nd.zeros(SHAPE)] * 2)
    c, d = nd.ones(SHAPE), nd.ones(SHAPE)
    store.push([2, 3], [c, d])  # first sight of the list
    b_clearing, a_recorded = threading.Event(), threading.Event()

    class HeldClear(set):
        def clear(self):
            if threading.current_thread() is not threading.main_thread():
                b_clearing.set()
                a_recorded.wait(0.5)
            super().clear()

    monkeypatch.setattr(ndarray, "_PACKED_IDS", HeldClear(ndarray._PACKED_IDS))
    b = threading.Thread(target=ndarray._forget_packed)
    b.start()
    assert b_clearing.wait(5)
    store.push([2, 3], [c, d])  # A: the second sight records the list
    a_recorded.set()
    b.join(5)
    assert not b.is_alive()
    c.close()
    with pytest.raises(ValueError, match="operation on a closed NDArray"):
        store.push([2, 3], [c, d])


def test_general_shapes_still_work(store):
    store.init([1, 2], [nd.zeros(SHAPE), nd.zeros(SHAPE)])
    store.push(numpy.int64(1), [nd.ones(SHAPE), numpy.ones(SHAPE, numpy.float32)])
    out = numpy.zeros(SHAPE, numpy.float32)
    store.pull([numpy.int32(1)], out=[out])
    numpy.testing.assert_array_equal(out, full(2))


def test_updater_exception_propagates_from_a_hot_push(store):
    class Boom(Exception):
        pass

    def updater(key, recv, stored):
        raise Boom("updater failed for key %d" % key)

    store.init(4, nd.ones(SHAPE))
    store._set_updater(updater)
    with pytest.raises(Boom, match="updater failed for key 4"):
        store.push(4, nd.ones(SHAPE))
    with pytest.raises(Boom, match="updater failed for key 4"):
        store.pushpull([4], [nd.ones(SHAPE)])
    out = nd.zeros(SHAPE)
    store.pull(4, out=out)
    numpy.testing.assert_array_equal(out.asnumpy(), full(1))


def test_hot_paths_on_a_closed_store(store):
    a = nd.ones(SHAPE)
    store.close()
    for call in (lambda: store.push(1, a), lambda: store.pull([1], out=[a]),
                 lambda: store.pushpull(1, a)):
        with pytest.raises(ValueError, match="operation on a closed KVStore"):
            call()


def test_a_call_that_meets_a_close_in_progress_waits_for_its_outcome(store):
    """close() clears the handle under the store's lock before it counts the running calls
    (kv.KVStore._active). A call that reads the cleared handle meanwhile must wait for
    close()'s outcome instead of failing: here close() finds a call and puts the handle back,
    as it does when it raises BusyError."""
    import threading
    import time

    store.init(5, nd.zeros(SHAPE))
    handle = store._handle
    cleared, done = threading.Event(), []

    def close_in_progress():
        with store._lock:
            store._handle = None
            cleared.set()
            time.sleep(0.2)
            store._handle = handle

    t = threading.Thread(target=close_in_progress)
    t.start()
    assert cleared.wait(10)
    a = nd.ones(SHAPE) * 3
    store.push(5, a)           # one-key hot path
    store.pull([5], out=[a])   # list hot path
    done.append(True)
    t.join(10)
    numpy.testing.assert_array_equal(a.asnumpy(), full(3))
    assert done and not store.closed


def test_string_keys_take_the_hot_paths(monkeypatch):
    s = kv.create("local")
    try:
        keys = ["w", "b", "ключ"]
        s.init(keys, [nd.zeros(SHAPE) for _ in keys])
        refuse_general_path(monkeypatch)
        s.push("ключ", nd.ones(SHAPE) * 4)
        out = nd.zeros(SHAPE)
        s.pull("ключ", out=out)
        numpy.testing.assert_array_equal(out.asnumpy(), full(4))
        s.push(("w", "b"), [nd.ones(SHAPE) * 2, nd.ones(SHAPE) * 3])
        outs = [nd.zeros(SHAPE), nd.zeros(SHAPE)]
        s.pull(["w", "b"], out=outs)
        numpy.testing.assert_array_equal(outs[1].asnumpy(), full(3))
        s.pushpull(["b"], [nd.ones(SHAPE) * 5], out=[outs[0]])
        numpy.testing.assert_array_equal(outs[0].asnumpy(), full(5))
        with pytest.raises(kvstore.UnknownKeyError):
            s.pull("nope", out=out)
    finally:
        s.close()


def test_string_keys_the_hot_paths_refuse_keep_their_errors(store):
    a = nd.ones(SHAPE)
    with pytest.raises(ValueError, match="string key 'a\\\\x00b' contains a NUL character"):
        store.push("a\0b", a)
    with pytest.raises(ValueError, match="contains a NUL character"):
        store.pull(["w", "a\0b"], out=[a, a])
    with pytest.raises(UnicodeEncodeError):
        store.push("\ud800", a)
    with pytest.raises(kvstore.KeyKindMismatchError, match="int and string keys mixed"):
        store.push(["w", 1], [a, a])
    store.init(1, nd.zeros(SHAPE))  # an int-key store: a string key is the library's error
    with pytest.raises(kvstore.KeyKindMismatchError):
        store.push("w", a)
