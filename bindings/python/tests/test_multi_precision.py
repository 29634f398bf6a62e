"""multi_precision=1 in an optimizer spec (docs/OPTIMIZERS.md#multi-precision): the spec
string passes through the binding unchanged, and float16 weights then keep a float32 master
copy: the pushed float16 values are summed in float32 and pulls return the master rounded
to float16."""
import numpy
import pytest

import kvstore
from kvstore import kv, nd


def pull16(store, key, shape):
    out = nd.zeros(shape, dtype=numpy.float16)
    store.pull(key, out=out)
    return out.asnumpy()


@pytest.mark.parametrize("store_type", ["local", "device"])
def test_float16_sums_accumulate_in_float32_master(store_type):
    # Each push sends 1024, 0.25 and 0.25: 1024.5 in float32. test(...) adds it to the
    # master: 1024.5, 2049, 3073.5, whose float16 roundings are 1024, 2048 and 3074. A
    # float16 sum (or no master copy) gives 3072.
    grads = [nd.array(numpy.full((4,), v, numpy.float16)) for v in (1024, 0.25, 0.25)]
    results = {}
    for spec in ("test(multi_precision=1)", "test"):
        with kv.create(store_type) as store:
            store.set_optimizer(spec)
            store.init(0, nd.zeros((4,), dtype=numpy.float16))
            for _ in range(3):
                store.push(0, grads)
            results[spec] = pull16(store, 0, (4,))
    numpy.testing.assert_array_equal(results["test(multi_precision=1)"], numpy.full((4,), 3074, numpy.float16))
    numpy.testing.assert_array_equal(results["test"], numpy.full((4,), 3072, numpy.float16))


def test_sgd_matches_float32_master_computation():
    rng = numpy.random.default_rng(7)
    w0 = rng.standard_normal(257).astype(numpy.float16)
    steps = [[(rng.standard_normal(257) * 1e-3).astype(numpy.float16) for _ in range(2)]
             for _ in range(5)]
    lr = numpy.float32(0.5)
    with kv.create("local") as store:
        store.set_optimizer("sgd(learning_rate=0.5,multi_precision=1)")
        store.init(3, nd.array(w0))
        master = w0.astype(numpy.float32)
        for gs in steps:
            store.push(3, [nd.array(g) for g in gs])
            g32 = gs[0].astype(numpy.float32) + gs[1].astype(numpy.float32)
            master = master + (numpy.float32(0) - lr * g32)  # sgd, momentum 0: w + mom
            numpy.testing.assert_array_equal(pull16(store, 3, (257,)), master.astype(numpy.float16))
        # Some of these updates are below half a float16 ulp: without the master they are lost.
        assert not numpy.array_equal(master.astype(numpy.float16), w0)


def test_multi_precision_must_be_a_flag():
    with kv.create("local") as store:
        with pytest.raises(kvstore.InvalidArgumentError) as info:
            store.set_optimizer("adam(multi_precision=2)")
        assert "multi_precision" in info.value.message and "0 or 1" in info.value.message
