"""The reference's API surface beyond push/pull: is_capable, optimizer objects (with
lazy_update's effect on row_sparse pushes), nd.waitall and row indexing of NDArrays."""
import numpy
import pytest

import kvstore
from kvstore import kv, nd, np, optimizer

SHAPE = (2, 3)


def value_of(store, key, shape=SHAPE):
    out = nd.zeros(shape)
    store.pull(key, out=out)
    return out.asnumpy()


# -- is_capable ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["local", "local_update_cpu", "local_allreduce_cpu", "device",
                                  "local_allreduce_device"])
def test_is_capable_optimizer_on_every_in_process_type(name):
    with kv.create(name) as store:
        assert kv.KVStore.OPTIMIZER == "optimizer"
        assert isinstance(store, kv.KVStoreBase) and kv.KVStoreBase.OPTIMIZER == "optimizer"
        assert store.is_capable(kv.KVStore.OPTIMIZER) is True
        assert store.is_capable("Optimizer") is True  # case-insensitive, as the reference


def test_is_capable_unknown_name_is_a_value_error_naming_the_known_ones(store):
    with pytest.raises(ValueError) as info:
        store.is_capable("row_sparse_pull")
    assert isinstance(info.value, kvstore.InvalidArgumentError)
    assert '"row_sparse_pull"' in info.value.message and '"optimizer"' in info.value.message
    with pytest.raises(TypeError):
        store.is_capable(None)
    with pytest.raises(ValueError, match="NUL"):
        store.is_capable("optimizer\0x")
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.is_capable("optimizer")


# -- optimizer objects -----------------------------------------------------------------------
@pytest.mark.parametrize("obj, spec", [
    (optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=1e-4, rescale_grad=0.5, clip_gradient=5),
     "sgd(learning_rate=0.1,momentum=0.9,wd=0.0001,rescale_grad=0.5,clip_gradient=5)"),
    (optimizer.SGD(lr=0.25), "sgd(learning_rate=0.25)"),
    (optimizer.SGD(), "sgd"),
    (optimizer.SGD(clip_gradient=None, multi_precision=False), "sgd"),
    (optimizer.NAG(momentum=0.5, learning_rate=0.1), "nag(learning_rate=0.1,momentum=0.5)"),
    (optimizer.Adam(learning_rate=0.001, beta1=0.8, beta2=0.99, epsilon=1e-6),
     "adam(learning_rate=0.001,beta1=0.8,beta2=0.99,epsilon=1e-06)"),
    (optimizer.AdaGrad(eps=1e-5, wd=0.1), "adagrad(eps=1e-05,wd=0.1)"),
    (optimizer.AdaGrad(epsilon=1e-5), "adagrad(eps=1e-05)"),
    (optimizer.RMSProp(rho=0.8, gamma2=0.7, centered=True, clip_weights=2),
     "rmsprop(gamma1=0.8,gamma2=0.7,centered=1,clip_weights=2)"),
    (optimizer.RMSProp(centered=False), "rmsprop(centered=0)"),
    (optimizer.Test(rescale_grad=3), "test(rescale_grad=3)"),
    (optimizer.create("ADAM", lr=0.5), "adam(learning_rate=0.5)"),
    (optimizer.SGD(learning_rate=numpy.float32(0.5), momentum=numpy.float64(0.25)),
     "sgd(learning_rate=0.5,momentum=0.25)"),
])
def test_optimizer_objects_render_their_spec(obj, spec):
    assert obj.spec == spec and str(obj) == spec
    assert obj == eval("optimizer." + repr(obj))  # the repr reads back
    with kv.create("local") as store:
        store.set_optimizer(obj)  # accepted as its spec string is


def test_optimizer_object_parameters_read_back():
    opt = optimizer.SGD(lr=0.1, momentum=0.9)
    assert opt.learning_rate == 0.1 and opt.lr == 0.1 and opt.momentum == 0.9
    assert opt.wd is None  # not given: the library's default
    assert opt.params == {"learning_rate": 0.1, "momentum": 0.9}
    assert opt.name == "sgd"
    with pytest.raises(AttributeError):
        opt.beta1


def test_optimizer_object_updates_like_its_spec_string():
    grads = [numpy.full(SHAPE, g, numpy.float32) for g in (1.0, -2.0, 0.5)]
    results = []
    for opt in (optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01),
                "sgd(learning_rate=0.1,momentum=0.9,wd=0.01)"):
        with kv.create("local") as store:
            store.init(3, nd.ones(SHAPE))
            store.set_optimizer(opt)
            for g in grads:
                store.push(3, nd.array(g))
            results.append(value_of(store, 3))
    numpy.testing.assert_array_equal(results[0], results[1])
    assert not numpy.array_equal(results[0], numpy.ones(SHAPE))


def test_optimizer_object_with_string_keys_and_test_optimizer(str_store):
    str_store.init("w", nd.ones(SHAPE))
    str_store.set_optimizer(optimizer.Test(rescale_grad=2))
    str_store.push("w", nd.ones(SHAPE) * 3)
    numpy.testing.assert_array_equal(value_of(str_store, "w"), numpy.full(SHAPE, 7))


def test_optimizer_errors_come_at_construction():
    with pytest.raises(TypeError, match="param_idx2name"):
        optimizer.SGD(param_idx2name={})  # a reference argument with no spec parameter
    with pytest.raises(TypeError, match="momentum"):
        optimizer.Adam(momentum=0.9)
    with pytest.raises(TypeError, match="given twice"):
        optimizer.SGD(lr=0.1, learning_rate=0.2)
    with pytest.raises(TypeError):
        optimizer.SGD(0.1)  # keywords only: the reference's first positional differs by class
    with pytest.raises(TypeError, match="real number"):
        optimizer.SGD(learning_rate="0.1")
    with pytest.raises(TypeError, match="True or False"):
        optimizer.RMSProp(centered=0.5)
    with pytest.raises(TypeError, match="abstract"):
        optimizer.Optimizer()
    with pytest.raises(ValueError, match="unknown optimizer 'adadelta'"):
        optimizer.create("adadelta")
    # Values the library refuses: its message, at construction.
    with pytest.raises(kvstore.InvalidArgumentError, match="momentum"):
        optimizer.SGD(momentum=1.5)
    with pytest.raises(ValueError, match="learning_rate"):
        optimizer.SGD(learning_rate=-1)
    with pytest.raises(ValueError):
        optimizer.Adam(epsilon=float("inf"))
    with pytest.raises(ValueError):
        optimizer.AdaGrad(clip_gradient=-1)


def test_multi_precision_goes_into_the_spec_only_when_true():
    opt = optimizer.SGD(learning_rate=0.1, multi_precision=True)
    assert opt.spec == "sgd(learning_rate=0.1,multi_precision=1)"
    assert optimizer.Adam(multi_precision=False).spec == "adam"
    assert optimizer.Test(multi_precision=True).spec == "test(multi_precision=1)"
    # float16 weights keep a float32 master: 1000 updates of 1e-4 each, too small for float16
    # alone (half an ulp of 1.0 is 2**-11), add up.
    with kv.create("local") as store:
        store.init(0, nd.ones((4,), dtype="float16"))
        store.set_optimizer(opt)
        g = nd.full((4,), -1e-3, dtype="float16")
        for _ in range(1000):
            store.push(0, g)
        out = nd.zeros((4,), dtype="float16")
        store.pull(0, out=out)
    assert abs(float(out.asnumpy()[0]) - 1.1) < 2e-3


@pytest.mark.parametrize("obj, spec", [
    (optimizer.SGD(lazy_update=False), "sgd(lazy_update=0)"),
    (optimizer.SGD(learning_rate=0.5, wd=0.1, lazy_update=True, multi_precision=True),
     "sgd(learning_rate=0.5,wd=0.1,lazy_update=1,multi_precision=1)"),
    (optimizer.SGD(lazy_update=None), "sgd"),
    (optimizer.Adam(beta1=0.8, lazy_update=0), "adam(beta1=0.8,lazy_update=0)"),
    (optimizer.create("adam", lazy_update=1), "adam(lazy_update=1)"),
])
def test_lazy_update_renders_into_sgd_and_adam_specs(obj, spec):
    assert obj.spec == spec
    assert obj == eval("optimizer." + repr(obj))


@pytest.mark.parametrize("cls", [optimizer.NAG, optimizer.AdaGrad, optimizer.RMSProp,
                                 optimizer.Test])
def test_lazy_update_is_refused_where_the_optimizer_has_no_lazy_path(cls):
    with pytest.raises(TypeError, match="unexpected keyword argument 'lazy_update'"):
        cls(lazy_update=False)
    with pytest.raises(TypeError, match="True or False"):
        optimizer.SGD(lazy_update=0.5)


def row_sparse_pushes(opt, pushes, shape=(4, 2)):
    """The stored value after row_sparse pushes (each a dict row -> gradient row) of a key
    initialised to ones, with opt installed."""
    with kv.create("local") as store:
        store.init(0, nd.ones(shape))
        store.set_optimizer(opt)
        for rows in pushes:
            ids = sorted(rows)
            store.push(0, nd.sparse.row_sparse_array(([rows[r] for r in ids], ids), shape=shape))
        return value_of(store, 0, shape)


def test_lazy_update_false_decays_rows_that_were_not_pushed():
    # sgd(lr=0.5, wd=0.1), row 3 pushed with 1: w = 1 - 0.5*(1 + 0.1*1) = 0.45 there; a dense
    # update also decays the other rows, 1 - 0.5*0.1 = 0.95.
    sgd = lambda lazy: optimizer.SGD(learning_rate=0.5, wd=0.1, lazy_update=lazy)
    lazy = row_sparse_pushes(sgd(True), [{3: [1, 1]}])
    numpy.testing.assert_allclose(lazy, [[1, 1], [1, 1], [1, 1], [0.45, 0.45]], rtol=1e-6)
    numpy.testing.assert_array_equal(row_sparse_pushes(sgd(None), [{3: [1, 1]}]), lazy)
    dense = row_sparse_pushes(sgd(False), [{3: [1, 1]}])
    numpy.testing.assert_allclose(dense, [[0.95, 0.95]] * 3 + [[0.45, 0.45]], rtol=1e-6)
    # adam likewise: wd's gradient moves the rows not pushed only when lazy_update is False.
    adam = lambda lazy: optimizer.Adam(learning_rate=0.1, wd=0.1, lazy_update=lazy)
    lazy = row_sparse_pushes(adam(True), [{3: [1, 1]}])
    dense = row_sparse_pushes(adam(False), [{3: [1, 1]}])
    numpy.testing.assert_array_equal(lazy[:3], numpy.ones((3, 2)))
    assert (dense[:3] < 0.95).all()
    numpy.testing.assert_array_equal(lazy[3], dense[3])
    assert (lazy[3] < 1).all()


def test_lazy_update_false_carries_momentum_into_rows_that_were_not_pushed():
    # sgd(lr=0.5, momentum=0.9): pushing row 1 with 1 makes its momentum -0.5 and w 0.5;
    # a second push, of row 3 only, moves row 1 again (w = 0.5 + 0.9*-0.5 = 0.05) only when
    # the update is dense. Rows never pushed have no momentum and stay 1 either way.
    sgd = lambda lazy: optimizer.SGD(learning_rate=0.5, momentum=0.9, lazy_update=lazy)
    pushes = [{1: [1, 1]}, {3: [1, 1]}]
    numpy.testing.assert_allclose(row_sparse_pushes(sgd(True), pushes),
                                  [[1, 1], [0.5, 0.5], [1, 1], [0.5, 0.5]], rtol=1e-6)
    numpy.testing.assert_allclose(row_sparse_pushes(sgd(False), pushes),
                                  [[1, 1], [0.05, 0.05], [1, 1], [0.5, 0.5]], rtol=1e-6)


def test_set_optimizer_rejects_other_objects(store):
    with pytest.raises(TypeError, match="kvstore.optimizer"):
        store.set_optimizer(object())


# -- nd.waitall ------------------------------------------------------------------------------
def test_waitall_with_in_process_stores_returns_at_once():
    stores = [kv.create("local"), kv.create("device")]
    a = nd.ones(SHAPE)
    for i, s in enumerate(stores):
        s.init(i, a)
        s.push(i, a * 2)
    nd.waitall()
    stores[0].close()
    nd.waitall()  # closed stores are skipped
    numpy.testing.assert_array_equal(value_of(stores[1], 1), numpy.full(SHAPE, 2))
    stores[1].close()
    nd.waitall()
    assert kv.waitall is nd.waitall


# -- row indexing ----------------------------------------------------------------------------
def test_row_read_is_a_copy():
    a = nd.array(numpy.arange(12).reshape(4, 3))
    r = a[1]
    assert isinstance(r, nd.NDArray) and r.shape == (3,) and r.dtype == a.dtype
    numpy.testing.assert_array_equal(r.asnumpy(), [3, 4, 5])
    r[:] = 0  # a copy: the array is unchanged
    numpy.testing.assert_array_equal(a.asnumpy()[1], [3, 4, 5])
    numpy.testing.assert_array_equal(a[-1].asnumpy(), [9, 10, 11])
    numpy.testing.assert_array_equal(a[1:3].asnumpy(), [[3, 4, 5], [6, 7, 8]])
    numpy.testing.assert_array_equal(a[-2:].asnumpy(), [[6, 7, 8], [9, 10, 11]])
    numpy.testing.assert_array_equal(a[::2].asnumpy(), [[0, 1, 2], [6, 7, 8]])
    assert a[3:10].shape == (1, 3) and a[5:].shape == (0, 3)  # slices clip, as in Python
    assert a[numpy.int64(2)].asnumpy().tolist() == [6, 7, 8]
    v = nd.array([1.5, 2.5, 3.5])
    assert v[1].shape == () and float(v[1]) == 2.5  # a row of a vector is a 0-d array
    assert a[:] is a and a[...] is a  # the whole array is the array itself
    assert isinstance(np.array([[1, 2]])[0], np.ndarray)  # the class is kept


def test_row_assignment_writes_the_rows():
    a = nd.zeros((4, 3), dtype="int32")
    a[1] = 7
    a[-1] = [1, 2, 3]
    a[2] = nd.array([4, 5, 6], dtype="int32")
    a[0:2] = numpy.array([[9, 9, 9], [8, 8, 8]])
    a[::3] += 0  # reads a copy, adds, assigns back through __setitem__
    numpy.testing.assert_array_equal(a.asnumpy(), [[9, 9, 9], [8, 8, 8], [4, 5, 6], [1, 2, 3]])
    a[1:3] = 0
    numpy.testing.assert_array_equal(a.asnumpy()[1:3], numpy.zeros((2, 3)))
    f = nd.zeros((2, 2), dtype="float16")
    f[1] = 0.5
    numpy.testing.assert_array_equal(f.asnumpy(), [[0, 0], [0.5, 0.5]])


def test_row_indexing_errors_change_nothing():
    a = nd.array(numpy.arange(6).reshape(2, 3))
    before = a.asnumpy()
    with pytest.raises(IndexError, match="index 2 is out of range for axis 0 of size 2"):
        a[2]
    with pytest.raises(IndexError, match="-3"):
        a[-3] = 1
    with pytest.raises(ValueError, match="shape"):
        a[0] = [1, 2]
    with pytest.raises(ValueError, match="shape"):
        a[0:2] = nd.ones((3, 3))
    with pytest.raises(TypeError, match="first axis"):
        a[0, 1]
    with pytest.raises(TypeError, match="first axis"):
        a[True]
    with pytest.raises(TypeError, match="slice bounds"):
        a[0.5:1]
    with pytest.raises(ValueError, match="step"):
        a[::0]
    with pytest.raises(TypeError):
        a[0] = "text"
    i = nd.zeros(3, dtype="uint8")
    with pytest.raises(ValueError, match="range of uint8"):
        i[0] = 256
    with pytest.raises(ValueError, match="range"):
        nd.zeros((1, 2), dtype="int32")[0] = float("nan")
    with pytest.raises(IndexError, match="0-d"):
        nd.full((), 1)[0]
    numpy.testing.assert_array_equal(a.asnumpy(), before)
    numpy.testing.assert_array_equal(i.asnumpy(), [0, 0, 0])


def test_row_indexing_inside_an_updater(store):
    """Arrays lent to an updater have no zero-copy view: rows go through a copy and back."""
    store.init(1, nd.zeros((3, 2)))

    def update(key, recv, stored):
        stored[key] = recv[key] * 10
        stored[-1] = stored[-1] + 1

    store._set_updater(update)
    store.push(1, nd.ones((3, 2)))
    numpy.testing.assert_array_equal(value_of(store, 1, (3, 2)), [[0, 0], [10, 10], [1, 1]])


@pytest.mark.skipif(kvstore.num_gpus() == 0, reason="no GPU")
def test_row_indexing_on_a_gpu_array():
    a = nd.array(numpy.arange(6).reshape(3, 2), ctx=kvstore.gpu(0))
    r = a[1]
    assert r.context == kvstore.gpu(0)
    numpy.testing.assert_array_equal(r.asnumpy(), [2, 3])
    a[0:2] = 7
    numpy.testing.assert_array_equal(a.asnumpy(), [[7, 7], [7, 7], [4, 5]])
