"""set_gradient_compression (docs/DISTRIBUTED.md#gradient-compression): the reference's
2-bit and 1-bit quantisation with a residual per key, checked against values worked out by
hand; {'type': 'none'} turns it off again; stores that do not compress refuse."""
import numpy
import pytest

import kvstore
from kvstore import kv, nd


def push_pull(store, key, grads, dtype=numpy.float32):
    store.push(key, [nd.array(numpy.array(g, dtype)) for g in grads])
    out = nd.zeros((len(grads[0]),), dtype=dtype)
    store.pull(key, out=out)
    return out.asnumpy()


def test_two_bit_residual_by_hand():
    with kv.create("device") as store:
        store.set_gradient_compression({"type": "2bit", "threshold": 0.5})
        store.init(0, nd.zeros((4,)))
        g = [0.3, 0.6, -0.7, 0.1]
        # r = g: 0.6 >= 0.5 -> +0.5, -0.7 <= -0.5 -> -0.5, the rest 0.
        numpy.testing.assert_array_equal(push_pull(store, 0, [g]), [0, 0.5, -0.5, 0])
        # r = 0.6, 0.7, -0.9, 0.2 (the residuals 0.3, 0.1, -0.2, 0.1 plus g).
        numpy.testing.assert_array_equal(push_pull(store, 0, [g]), [0.5, 0.5, -0.5, 0])


def test_each_value_has_its_own_residual_and_float16():
    with kv.create("device") as store:
        store.set_gradient_compression({"type": "2bit", "threshold": "0.25"})
        store.init("w", nd.zeros((3,), dtype=numpy.float16))
        # Two values of one push: each quantised on its own, the +-0.25s summed.
        out = push_pull(store, "w", [[0.25, 0.125, -0.5], [0.25, 0.125, 0.0]], numpy.float16)
        numpy.testing.assert_array_equal(out, numpy.array([0.5, 0, -0.25], numpy.float16))
        out = push_pull(store, "w", [[0, 0.125, 0], [0, 0.125, 0]], numpy.float16)
        numpy.testing.assert_array_equal(out, numpy.array([0, 0.5, -0.25], numpy.float16))


def test_one_bit_and_turning_off():
    with kv.create("device") as store:
        store.set_gradient_compression({"type": "1bit", "threshold": 0})
        store.init(0, nd.zeros((3,)))
        # r > 0 -> +1 (r -= 1), else -1 (r += 1), whatever the threshold.
        numpy.testing.assert_array_equal(push_pull(store, 0, [[0.5, -0.5, 0]]), [1, -1, -1])
        store.set_gradient_compression({"type": "none"})
        numpy.testing.assert_array_equal(push_pull(store, 0, [[0.5, -0.5, 0]]), [0.5, -0.5, 0])


def test_refusals():
    with kv.create("local") as store:
        with pytest.raises(kvstore.NotSupportedError, match="local"):
            store.set_gradient_compression({"type": "2bit"})
    with kv.create("device") as store:
        with pytest.raises(kvstore.InvalidArgumentError, match="3bit"):
            store.set_gradient_compression({"type": "3bit"})
        with pytest.raises(kvstore.InvalidArgumentError, match="threshold"):
            store.set_gradient_compression({"type": "2bit", "threshold": -1})
        with pytest.raises(kvstore.InvalidArgumentError, match="treshold"):
            store.set_gradient_compression({"type": "2bit", "treshold": 1})
        with pytest.raises(TypeError):
            store.set_gradient_compression("2bit")


def test_pull_parameter():
    # "pull" (docs/DISTRIBUTED.md, "Compressed pulls") compresses the dist
    # stores' pulls; a device store accepts it and pulls exactly (nothing crosses a network).
    with kv.create("device") as store:
        store.set_gradient_compression({"type": "2bit", "threshold": 0.5, "pull": 1})
        store.init(0, nd.zeros((4,)))
        numpy.testing.assert_array_equal(push_pull(store, 0, [[0.3, 0.6, -0.7, 0.1]]),
                                         [0, 0.5, -0.5, 0])
        store.set_gradient_compression({"type": "2bit", "pull": "0"})
        with pytest.raises(kvstore.InvalidArgumentError, match="pull"):
            store.set_gradient_compression({"type": "1bit", "pull": "1"})
        with pytest.raises(kvstore.InvalidArgumentError, match="pull"):
            store.set_gradient_compression({"type": "2bit", "pull": "yes"})
