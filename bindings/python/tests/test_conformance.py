"""Conformance scenarios C2-C13 of bindings/conformance/SCENARIOS.md (C1 is in
test_tutorials.py, C14 in test_release.py). "Unchanged" means: pull the key afterwards and
compare with the value it held before the failing call."""
import threading

import numpy
import pytest

import kvstore
from kvstore import kv, nd

SHAPE = (2, 3)


def value_of(store, key, shape=SHAPE, dtype=numpy.float32):
    out = nd.zeros(shape, dtype=dtype)
    store.pull(key, out=out)
    return out.asnumpy()


def full(v, shape=SHAPE, dtype=numpy.float32):
    return numpy.full(shape, v, dtype)


# -- C2 ------------------------------------------------------------------------------------
def test_c2_shape_mismatch_on_push(store):
    store.init(3, nd.ones(SHAPE) * 5)
    with pytest.raises(kvstore.ShapeMismatchError) as info:
        store.push(3, nd.ones((3, 2)))
    err = info.value
    assert isinstance(err, kvstore.KVStoreError) and isinstance(err, ValueError)
    assert err.code == -6 and err.name == "KV_ERR_SHAPE_MISMATCH"
    # the library's message, naming the key and both shapes
    assert err.message == kvstore.errors.last_error()
    assert "3" in err.message and "(2,3)" in err.message.replace(" ", "") \
        and "(3,2)" in err.message.replace(" ", "")
    assert err.message in str(err)
    numpy.testing.assert_array_equal(value_of(store, 3), full(5))


def test_c2_shape_mismatch_in_a_multi_value_push_changes_nothing(store):
    store.init([1, 2], [nd.ones(SHAPE), nd.ones(SHAPE) * 2])
    with pytest.raises(kvstore.ShapeMismatchError):
        store.push([1, 2], [nd.ones(SHAPE) * 7, nd.ones((4,))])
    numpy.testing.assert_array_equal(value_of(store, 1), full(1))
    numpy.testing.assert_array_equal(value_of(store, 2), full(2))


def test_c2_shape_mismatch_on_pull_leaves_output(store):
    store.init(3, nd.ones(SHAPE))
    out = nd.ones((6,)) * 9
    with pytest.raises(kvstore.ShapeMismatchError):
        store.pull(3, out=out)
    numpy.testing.assert_array_equal(out.asnumpy(), numpy.full((6,), 9, numpy.float32))


# -- C3 ------------------------------------------------------------------------------------
def test_c3_dtype_mismatch_on_push(store):
    store.init(3, nd.ones(SHAPE) * 4)
    with pytest.raises(kvstore.DtypeMismatchError) as info:
        store.push(3, nd.ones(SHAPE, dtype="float64"))
    msg = info.value.message
    assert info.value.code == -7 and isinstance(info.value, TypeError)
    assert "float32" in msg and "float64" in msg and "3" in msg
    numpy.testing.assert_array_equal(value_of(store, 3), full(4))


# -- C4 ------------------------------------------------------------------------------------
def test_c4_unknown_key_on_push(store):
    store.init(3, nd.ones(SHAPE))
    with pytest.raises(kvstore.UnknownKeyError) as info:
        store.push(42, nd.ones(SHAPE))
    assert "42" in info.value.message and isinstance(info.value, LookupError)
    numpy.testing.assert_array_equal(value_of(store, 3), full(1))


def test_c4_unknown_key_on_pull_does_not_write_output(store):
    store.init(3, nd.ones(SHAPE) * 2)
    out = nd.ones(SHAPE) * -1
    with pytest.raises(kvstore.UnknownKeyError) as info:
        store.pull(43, out=out)
    assert "43" in info.value.message
    numpy.testing.assert_array_equal(out.asnumpy(), full(-1))
    # a pull listing a known and an unknown key writes neither output
    a, b = nd.ones(SHAPE) * -1, nd.ones(SHAPE) * -1
    with pytest.raises(kvstore.UnknownKeyError):
        store.pull([3, 44], out=[a, b])
    numpy.testing.assert_array_equal(a.asnumpy(), full(-1))
    numpy.testing.assert_array_equal(b.asnumpy(), full(-1))


def test_c4_unknown_string_key(str_store):
    str_store.init("known", nd.ones(SHAPE))
    out = nd.ones(SHAPE) * 8
    with pytest.raises(kvstore.UnknownKeyError) as info:
        str_store.pull("missing", out=out)
    assert "missing" in info.value.message
    numpy.testing.assert_array_equal(out.asnumpy(), full(8))


# -- C5 ------------------------------------------------------------------------------------
def test_c5_duplicate_init_keeps_first_value(store):
    store.init(3, nd.ones(SHAPE) * 2)
    with pytest.raises(kvstore.DuplicateKeyError) as info:
        store.init(3, nd.ones(SHAPE) * 9)
    assert "3" in info.value.message and info.value.code == -4
    numpy.testing.assert_array_equal(value_of(store, 3), full(2))


def test_c5_key_repeated_in_one_init(store):
    with pytest.raises(kvstore.KVStoreError):
        store.init([4, 4], [nd.ones(SHAPE), nd.ones(SHAPE)])
    with pytest.raises(kvstore.UnknownKeyError):
        store.pull(4, out=nd.zeros(SHAPE))


# -- C6 ------------------------------------------------------------------------------------
def test_c6_int_key_after_string_keys(str_store):
    str_store.init("w", nd.ones(SHAPE) * 3)
    for call in (lambda: str_store.init(1, nd.ones(SHAPE)),
                 lambda: str_store.push(1, nd.ones(SHAPE)),
                 lambda: str_store.pull(1, out=nd.zeros(SHAPE))):
        with pytest.raises(kvstore.KeyKindMismatchError) as info:
            call()
        assert "1" in info.value.message and isinstance(info.value, TypeError)
    numpy.testing.assert_array_equal(value_of(str_store, "w"), full(3))


def test_c6_string_key_after_int_keys(store):
    store.init(1, nd.ones(SHAPE) * 3)
    with pytest.raises(kvstore.KeyKindMismatchError) as info:
        store.push("w", nd.ones(SHAPE))
    assert "w" in info.value.message
    numpy.testing.assert_array_equal(value_of(store, 1), full(3))


def test_c6_mixed_kinds_in_one_call(store):
    store.init(1, nd.ones(SHAPE) * 3)
    with pytest.raises(kvstore.KeyKindMismatchError) as info:
        store.push([1, "w"], [nd.ones(SHAPE), nd.ones(SHAPE)])
    assert "'w'" in info.value.message
    numpy.testing.assert_array_equal(value_of(store, 1), full(3))


# -- C7 ------------------------------------------------------------------------------------
class Boom(Exception):
    pass


def test_c7_updater_exception_reaches_push_caller(store, capfd):
    store.init(3, nd.ones(SHAPE) * 2)

    def updater(key, input, stored):
        stored += input  # modifies stored, then fails: the library must roll back
        raise Boom("updater failed for key %d" % key)

    store._set_updater(updater)
    with pytest.raises(Boom, match="updater failed for key 3") as info:
        store.push(3, nd.ones(SHAPE) * 5)
    # the traceback of the original raise is kept
    assert info.traceback[-1].name == "updater"
    # caught in the trampoline: ctypes never saw (and printed) it
    assert "Exception ignored" not in capfd.readouterr().err
    numpy.testing.assert_array_equal(value_of(store, 3), full(2))
    # the store still works after the failure
    store._set_updater(lambda k, i, s: s.__iadd__(i))
    store.push(3, nd.ones(SHAPE))
    numpy.testing.assert_array_equal(value_of(store, 3), full(3))


def test_c7_updater_exception_in_pushpull_leaves_outputs(store):
    store.init(3, nd.ones(SHAPE) * 2)

    def updater(key, input, stored):
        raise ValueError("nope")

    store._set_updater(updater)
    out = nd.ones(SHAPE) * -4
    with pytest.raises(ValueError, match="nope"):
        store.pushpull(3, nd.ones(SHAPE), out=out)
    numpy.testing.assert_array_equal(out.asnumpy(), full(-4))
    numpy.testing.assert_array_equal(value_of(store, 3), full(2))


def test_c7_updater_failure_on_one_key_of_several(store):
    store.init([1, 2, 3], [nd.ones(SHAPE), nd.ones(SHAPE) * 2, nd.ones(SHAPE) * 3])

    def updater(key, input, stored):
        if key == 2:
            raise KeyError(key)
        stored += input

    store._set_updater(updater)
    with pytest.raises(KeyError):
        store.push([1, 2, 3], [nd.ones(SHAPE)] * 3)
    # the failed push is atomic: no key of the call changed
    for k in (1, 2, 3):
        numpy.testing.assert_array_equal(value_of(store, k), full(k))


def test_c7_updater_using_the_store_itself_fails_cleanly(store):
    store.init(1, nd.ones(SHAPE))

    def updater(key, input, stored):
        store.pull(key, out=nd.zeros(SHAPE))  # data call from inside the updater

    store._set_updater(updater)
    with pytest.raises(kvstore.InvalidArgumentError):
        store.push(1, nd.ones(SHAPE) * 3)
    numpy.testing.assert_array_equal(value_of(store, 1), full(1))


def test_c7_keyboard_interrupt_in_updater_is_not_swallowed(store):
    store.init(1, nd.ones(SHAPE))

    def updater(key, input, stored):
        raise KeyboardInterrupt

    store._set_updater(updater)
    with pytest.raises(KeyboardInterrupt):
        store.push(1, nd.ones(SHAPE))
    numpy.testing.assert_array_equal(value_of(store, 1), full(1))


# -- C8 ------------------------------------------------------------------------------------
class CountingMomentum(object):
    """A stateful updater: counts calls and keeps a per-key velocity across pushes."""

    def __init__(self, momentum):
        self.momentum = momentum
        self.calls = 0
        self.velocity = {}
        self.order = []

    def __call__(self, key, grad, weight):
        self.calls += 1
        self.order.append(key)
        v = self.velocity.get(key, 0.0) * self.momentum + grad.asnumpy()
        self.velocity[key] = v
        weight -= numpy.asarray(v, dtype=numpy.float32)


def test_c8_stateful_updater(store):
    store.init([1, 2], [nd.zeros(SHAPE), nd.ones(SHAPE) * 10])
    upd = CountingMomentum(0.5)
    store._set_updater(upd)
    for _ in range(3):
        store.push(1, nd.ones(SHAPE))
    store.push(2, [nd.ones(SHAPE), nd.ones(SHAPE)])  # summed first: one call with 2
    assert upd.calls == 4 and upd.order == [1, 1, 1, 2]
    # key 1: v = 1, 1.5, 1.75 -> w = -(1 + 1.5 + 1.75)
    numpy.testing.assert_allclose(value_of(store, 1), full(-4.25))
    numpy.testing.assert_allclose(upd.velocity[1], full(1.75, dtype=numpy.float64))
    numpy.testing.assert_allclose(value_of(store, 2), full(8))


# -- C9 ------------------------------------------------------------------------------------
def test_c9_int_keys(store):
    store.init([0, -5, 2 ** 31 - 1], [nd.ones(SHAPE) * v for v in (1, 2, 3)])
    store.push(-5, nd.ones(SHAPE) * 7)
    numpy.testing.assert_array_equal(value_of(store, -5), full(7))
    numpy.testing.assert_array_equal(value_of(store, 2 ** 31 - 1), full(3))
    numpy.testing.assert_array_equal(value_of(store, numpy.int64(0)), full(1))
    with pytest.raises(OverflowError):
        store.push(2 ** 31, nd.ones(SHAPE))
    with pytest.raises(TypeError):
        store.push(1.5, nd.ones(SHAPE))
    with pytest.raises(TypeError):
        store.push(True, nd.ones(SHAPE))


def test_c9_string_keys_with_string_updater(str_store):
    keys = ["weight", "bias", "emb\u00e9dding"]
    str_store.init(keys, [nd.ones(SHAPE) * v for v in (1, 2, 3)])
    seen = []

    def updater(key, input, stored):
        seen.append(key)
        stored += input * 2

    str_store._set_updater(updater)
    str_store.push(keys, [nd.ones(SHAPE)] * 3)
    assert seen == keys and all(isinstance(k, str) for k in seen)
    for k, v in zip(keys, (3, 4, 5)):
        numpy.testing.assert_array_equal(value_of(str_store, k), full(v))
    with pytest.raises(ValueError):
        str_store.push("a\0b", nd.ones(SHAPE))


def test_c9_str_only_updater(str_store):
    str_store.init("k", nd.ones(SHAPE))
    seen = []
    str_store._set_str_updater(lambda key, i, s: (seen.append(key), s.__imul__(i)))
    str_store.push("k", nd.ones(SHAPE) * 3)
    assert seen == ["k"]
    numpy.testing.assert_array_equal(value_of(str_store, "k"), full(3))


def test_c9_updater_reset_restores_assign(store):
    store.init(1, nd.ones(SHAPE))
    store._set_updater(lambda k, i, s: s.__iadd__(i))
    store.push(1, nd.ones(SHAPE))
    numpy.testing.assert_array_equal(value_of(store, 1), full(2))
    store._set_updater(None)
    store.push(1, nd.ones(SHAPE) * 9)
    numpy.testing.assert_array_equal(value_of(store, 1), full(9))
    with pytest.raises(TypeError):
        store._set_updater(42)


# -- C10 -----------------------------------------------------------------------------------
def test_c10_lists(store):
    store.init([1, 2, 3], [nd.zeros(SHAPE)] * 3)
    # several values for one key are summed
    store.push(1, [nd.ones(SHAPE) * v for v in (1, 2, 3, 4)])
    numpy.testing.assert_array_equal(value_of(store, 1), full(10))
    # the key repeated in a list is summed too
    store.push([2, 2], [nd.ones(SHAPE), nd.ones(SHAPE) * 5])
    numpy.testing.assert_array_equal(value_of(store, 2), full(6))
    # list of keys, list of lists of values
    store.push([1, 3], [[nd.ones(SHAPE)] * 2, [nd.ones(SHAPE) * 4] * 3])
    numpy.testing.assert_array_equal(value_of(store, 1), full(2))
    numpy.testing.assert_array_equal(value_of(store, 3), full(12))
    # pull into several outputs fills each
    outs = [nd.zeros(SHAPE) for _ in range(3)]
    store.pull(3, out=outs)
    for o in outs:
        numpy.testing.assert_array_equal(o.asnumpy(), full(12))
    outs = [[nd.zeros(SHAPE), nd.zeros(SHAPE)], nd.zeros(SHAPE)]
    store.pull([1, 2], out=outs)
    numpy.testing.assert_array_equal(outs[0][1].asnumpy(), full(2))
    numpy.testing.assert_array_equal(outs[1].asnumpy(), full(6))


def test_c10_list_errors(store):
    store.init(1, nd.zeros(SHAPE))
    with pytest.raises(ValueError, match="2 keys but 1 values"):
        store.push([1, 1], [nd.ones(SHAPE)])
    with pytest.raises(TypeError, match="needs a list"):
        store.push([1], nd.ones(SHAPE))
    with pytest.raises(ValueError, match="empty list"):
        store.push(1, [])
    with pytest.raises(TypeError, match="NDArrays"):
        store.push(1, "not an array")
    with pytest.raises(TypeError, match="out is required"):
        store.pull(1)
    numpy.testing.assert_array_equal(value_of(store, 1), full(0))


def test_c10_numpy_values_and_outputs(store):
    store.init(1, numpy.arange(6, dtype=numpy.float32).reshape(SHAPE))
    store.push(1, [numpy.ones(SHAPE, numpy.float32), nd.ones(SHAPE)])
    out = numpy.zeros(SHAPE, numpy.float32)
    store.pull(1, out=out)
    numpy.testing.assert_array_equal(out, full(2))
    bad = numpy.zeros(SHAPE, numpy.float32)
    bad.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        store.pull(1, out=bad)


# -- C11 -----------------------------------------------------------------------------------
def test_c11_pushpull(store):
    store.init(3, nd.ones(SHAPE))
    store._set_updater(lambda k, i, s: s.__iadd__(i))
    out = nd.zeros(SHAPE)
    store.pushpull(3, [nd.ones(SHAPE) * 2, nd.ones(SHAPE) * 3], out=out)
    numpy.testing.assert_array_equal(out.asnumpy(), full(6))
    # without out, the merged value is written into the value
    v = nd.ones(SHAPE)
    store.pushpull(3, v)
    numpy.testing.assert_array_equal(v.asnumpy(), full(7))
    numpy.testing.assert_array_equal(value_of(store, 3), full(7))


def test_c11_broadcast(store):
    outs = [nd.zeros(SHAPE), nd.zeros(SHAPE)]
    store.broadcast(5, nd.ones(SHAPE) * 4, out=outs)
    for o in outs:
        numpy.testing.assert_array_equal(o.asnumpy(), full(4))
    numpy.testing.assert_array_equal(value_of(store, 5), full(4))
    with pytest.raises(kvstore.DuplicateKeyError):
        store.broadcast(5, nd.ones(SHAPE) * 9, out=outs[0])
    numpy.testing.assert_array_equal(value_of(store, 5), full(4))


def test_c11_broadcast_string_keys(str_store):
    out = nd.zeros(SHAPE)
    str_store.broadcast("b", nd.ones(SHAPE) * 2, out=out)
    numpy.testing.assert_array_equal(out.asnumpy(), full(2))
    with pytest.raises(kvstore.DuplicateKeyError):
        str_store.broadcast("b", nd.ones(SHAPE), out=out)


# -- C12 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "uint8"])
def test_c12_dtypes_round_trip(store, dtype):
    src = (numpy.arange(12).reshape(3, 4) % 7).astype(dtype)
    arr = nd.array(src)
    assert arr.dtype == numpy.dtype(dtype)
    store.init(1, arr)
    out = nd.zeros((3, 4), dtype=dtype)
    store.pull(1, out=out)
    got = out.asnumpy()
    assert got.dtype == numpy.dtype(dtype)
    numpy.testing.assert_array_equal(got, src)
    store.push(1, [nd.array(src), nd.ones((3, 4), dtype=dtype)])
    store.pull(1, out=out)
    numpy.testing.assert_array_equal(out.asnumpy(), src + numpy.ones_like(src))
    np_out = numpy.zeros((3, 4), dtype=dtype)
    store.pull(1, out=np_out)
    numpy.testing.assert_array_equal(np_out, src + numpy.ones_like(src))


def test_c12_unsupported_dtype_is_rejected():
    with pytest.raises(TypeError, match="not supported"):
        nd.zeros(3, dtype="int16")
    with pytest.raises(TypeError, match="not supported"):
        nd.array(numpy.zeros(3, numpy.complex64), dtype="complex64")


# -- C13 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["local", "LOCAL", "Local_Update_CPU", "device",
                                  "local_allreduce_device"])
def test_c13_type_name_lowercased(name):
    with kv.create(name) as s:
        assert s.type == name.lower()
        assert s.rank == 0 and s.num_workers == 1


def test_c13_unknown_type_lists_valid_names():
    with pytest.raises(kvstore.InvalidArgumentError) as info:
        kv.create("no_such_store")
    msg = info.value.message
    assert "no_such_store" in msg
    for valid in ("local", "device", "nccl", "dist_sync", "dist_async"):
        assert valid in msg
    with pytest.raises(TypeError):
        kv.create(3)


# -- threads -------------------------------------------------------------------------------
def test_updater_exceptions_stay_on_their_thread(store):
    """Pending callback exceptions are per thread: a failure on one thread never surfaces
    in another thread's push."""
    keys = list(range(8))
    store.init(keys, [nd.zeros(SHAPE)] * len(keys))

    def updater(key, input, stored):
        if key % 2:
            raise RuntimeError("odd key %d" % key)
        stored += input

    store._set_updater(updater)
    results = {}

    def worker(k):
        try:
            for _ in range(20):
                store.push(k, nd.ones(SHAPE))
            results[k] = "ok"
        except RuntimeError as exc:
            results[k] = str(exc).splitlines()[0]

    threads = [threading.Thread(target=worker, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in keys:
        if k % 2:
            assert results[k] == "odd key %d" % k
            numpy.testing.assert_array_equal(value_of(store, k), full(0))
        else:
            assert results[k] == "ok"
            numpy.testing.assert_array_equal(value_of(store, k), full(20))


# -- built-in optimizers -------------------------------------------------------------------
def test_set_optimizer(store):
    store.init([1, 2], [nd.ones(SHAPE), nd.ones(SHAPE) * 10])
    store.set_optimizer("sgd(learning_rate=0.5)")
    store.push(1, nd.ones(SHAPE) * 2)  # w -= 0.5 * 2
    numpy.testing.assert_array_equal(value_of(store, 1), full(0))
    store.set_optimizer("test(rescale_grad=3)")  # w += 3 * g, replaces sgd
    store.push(2, [nd.ones(SHAPE), nd.ones(SHAPE)])
    numpy.testing.assert_array_equal(value_of(store, 2), full(16))
    with pytest.raises(kvstore.InvalidArgumentError) as info:
        store.set_optimizer("sgd(momentun=0.9)")
    assert "momentun" in info.value.message
    with pytest.raises(TypeError):
        store.set_optimizer(None)


def test_strings_with_nul_are_rejected_not_truncated(store):
    """A C string ends at the first NUL: the library would see "sgd(learning_rate=0.5)" and
    accept a spec the caller never wrote. Every str the binding hands to C is checked."""
    store.init(1, nd.ones(SHAPE) * 4)
    with pytest.raises(ValueError, match="NUL"):
        store.set_optimizer("sgd(learning_rate=0.5)\0(momentum=0.9)")
    store.push(1, nd.ones(SHAPE) * 2)  # still the default updater: assign
    numpy.testing.assert_array_equal(value_of(store, 1), full(2))
    with pytest.raises(ValueError, match="NUL"):
        store._send_command_to_servers(0, "body\0tail")
    with pytest.raises(ValueError, match="NUL"):
        kv.create("local\0dist_sync")
