"""C14: release. Arrays and stores free their library handles deterministically, resident
memory stays flat over many create/free cycles, and an updater's free hook releases the
Python-side references (the CFUNCTYPE trampoline and the callable)."""
import gc
import sys
import weakref

import numpy
import pytest

from kvstore import _callback, kv, nd
from conftest import SANITIZED, assert_rss_growth_below, rss_kib

# Growth bounds. One leaked 4x4 float32 array (64 B of data plus its C++ object) per cycle
# would grow RSS by well over 10 MiB over 10^5 cycles; allocator noise stays far below 4 MiB.
ARRAY_CYCLES = 10 ** 5
ARRAY_RSS_BOUND_KIB = 4 * 1024
STORE_CYCLES = 10 ** 3
STORE_RSS_BOUND_KIB = 4 * 1024


def test_c14_array_create_free_cycles_keep_rss_flat():
    for _ in range(2000):  # warm up the allocators
        nd.zeros((4, 4)).close()
    gc.collect()
    before = rss_kib()
    for i in range(ARRAY_CYCLES):
        if i % 2:
            a = nd.ones((4, 4))
            a.close()
        else:
            with nd.zeros((4, 4), dtype="float64"):
                pass
    gc.collect()
    assert_rss_growth_below(rss_kib() - before, ARRAY_RSS_BOUND_KIB,
                            "%d array create/free cycles" % ARRAY_CYCLES)


def test_c14_arrays_released_by_refcount_and_temporaries_keep_rss_flat():
    """__del__ path: arrays dropped without close(), including the temporaries of
    arithmetic, are released as soon as they are unreachable."""
    x = nd.ones((16,))
    for _ in range(2000):
        (x * 2 + 1) / 3
    gc.collect()
    before = rss_kib()
    for _ in range(ARRAY_CYCLES // 4):
        (x * 2 + 1) / 3  # three temporaries per iteration
    gc.collect()
    assert_rss_growth_below(rss_kib() - before, ARRAY_RSS_BOUND_KIB,
                            "%d iterations of array temporaries" % (ARRAY_CYCLES // 4))


@pytest.mark.skipif(SANITIZED, reason="a sanitizer allocator quarantines freed memory")
def test_c14_big_array_memory_is_returned():
    """A 64 MiB array shows up in RSS and goes away on close()."""
    base = rss_kib()
    a = nd.ones((16, 1024, 1024))  # 64 MiB of float32, written by the fill
    assert rss_kib() - base > 48 * 1024
    a.close()
    assert rss_kib() - base < 16 * 1024


def test_c14_store_cycles_with_updater_release_the_callable():
    hooks_before = _callback.free_hook_calls()
    live_before = _callback.live_registrations()
    refs = []
    for _ in range(50):  # warm-up
        with kv.create("local") as s:
            s._set_updater(lambda k, i, st: None)
    gc.collect()
    before = rss_kib()
    hooks_before = _callback.free_hook_calls()
    for i in range(STORE_CYCLES):
        def updater(key, input, stored):
            stored += input
        s = kv.create("local")
        s.init(i, nd.ones((8,)))
        s._set_updater(updater)  # registers an int and a string updater
        s.push(i, nd.ones((8,)))
        if i % 100 == 0:
            refs.append(weakref.ref(updater))
        if i % 2:
            s.close()
        else:
            del s  # released by __del__
        del updater
    gc.collect()
    growth = rss_kib() - before
    # each store released its two registrations exactly once, through the free hook
    assert _callback.free_hook_calls() - hooks_before == 2 * STORE_CYCLES
    assert _callback.live_registrations() == live_before
    assert all(r() is None for r in refs)
    assert_rss_growth_below(growth, STORE_RSS_BOUND_KIB,
                            "%d store create/free cycles with an updater" % STORE_CYCLES)


def test_c14_free_hook_drops_the_cfunctype_reference():
    s = kv.create("local")

    def updater(key, input, stored):
        pass

    s._set_updater(updater)
    regs = [r for r in _callback._registry.values() if r.fn is updater]
    assert len(regs) == 2  # int and string updater
    cfuncs = [r.cfunc for r in regs]
    del regs
    held = [sys.getrefcount(c) for c in cfuncs]
    fn_ref = weakref.ref(updater)
    del updater
    assert fn_ref() is not None  # kept alive by the registrations
    hooks = _callback.free_hook_calls()
    s.close()
    assert _callback.free_hook_calls() == hooks + 2
    # the registry's reference (via the Registration) is gone: only ours remain
    assert [sys.getrefcount(c) for c in cfuncs] == [n - 1 for n in held]
    del cfuncs
    assert fn_ref() is None


def test_c14_replacing_the_updater_releases_the_previous_one():
    with kv.create("local") as s:
        def first(k, i, st):
            pass
        s._set_updater(first)
        ref = weakref.ref(first)
        del first
        hooks = _callback.free_hook_calls()
        s._set_updater(lambda k, i, st: None)
        assert _callback.free_hook_calls() == hooks + 2
        assert ref() is None
        s._set_updater(None)
        assert _callback.free_hook_calls() == hooks + 4


def test_c14_close_is_idempotent_and_blocks_further_use():
    a = nd.ones(3)
    a.close()
    a.close()
    assert a.closed and "closed" in repr(a)
    with pytest.raises(ValueError, match="closed"):
        a.asnumpy()
    s = kv.create("local")
    s.close()
    s.close()
    with pytest.raises(ValueError, match="closed"):
        s.init(1, nd.ones(3))
    with nd.ones(2) as b:
        pass
    assert b.closed


def test_c14_zero_copy_view_outlives_close():
    a = nd.ones((1000,)) * 3
    view = a.asnumpy(copy=False)
    a.close()  # the view still holds the memory
    assert a.closed
    numpy.testing.assert_array_equal(view, numpy.full(1000, 3, numpy.float32))
    view[:] = 1  # still writable, still valid
    assert view.sum() == 1000


def test_c14_borrowed_updater_arrays_are_invalid_after_the_call(store):
    kept = []
    store.init(1, nd.ones(3))

    def updater(key, input, stored):
        kept.extend([input, stored])
        with pytest.raises(ValueError, match="lent to an updater"):
            stored.asnumpy(copy=False)
        stored += input

    store._set_updater(updater)
    store.push(1, nd.ones(3))
    for arr in kept:
        with pytest.raises(ValueError, match="lent to an updater"):
            arr.asnumpy()


def test_c14_store_referenced_by_its_own_updater_is_collected():
    """An updater closing over its store makes a reference cycle; the collector reclaims
    it, and the library's free hooks release the registrations."""
    live = _callback.live_registrations()
    hooks = _callback.free_hook_calls()
    s = kv.create("local")
    s.init(1, nd.ones(2))
    calls = []

    def updater(key, input, stored, store=s):
        calls.append(store.type)  # refers to the store (through its defaults)
        stored += input

    s._set_updater(updater)
    s.push(1, nd.ones(2))
    assert calls == ["local"]
    store_ref = weakref.ref(s)
    del s, updater
    gc.collect()
    assert store_ref() is None
    assert _callback.free_hook_calls() == hooks + 2
    assert _callback.live_registrations() == live
