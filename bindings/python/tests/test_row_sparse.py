"""Row-sparse arrays and row_sparse_pull in the Python binding, with the reference's shapes:
nd.sparse.row_sparse_array from (data, indices) and from dense, RowSparseNDArray's stype,
indices, data and tostype, NDArray.tostype, pushes of row-sparse values (summed by rows;
updaters receive a RowSparseNDArray), and kv.row_sparse_pull with one row_ids for many
outputs, lists of keys and string keys."""
import numpy
import pytest

import kvstore
from kvstore import kv, nd
from kvstore.nd import sparse


def table(rows=6, cols=2):
    return numpy.arange(rows * cols, dtype=numpy.float32).reshape(rows, cols)


def test_row_sparse_array_from_data_and_indices():
    a = sparse.row_sparse_array(([[1, 2], [3, 4]], [4, 1]), shape=(6, 2))
    assert isinstance(a, sparse.RowSparseNDArray) and isinstance(a, nd.NDArray)
    assert a.stype == "row_sparse" and a.shape == (6, 2) and a.dtype == numpy.float32
    assert a.indices.asnumpy().tolist() == [1, 4]  # sorted, rows follow their ids
    assert a.data.asnumpy().tolist() == [[3, 4], [1, 2]]
    dense = a.tostype("default")
    assert dense.stype == "default" and type(dense) is nd.NDArray
    want = numpy.zeros((6, 2), numpy.float32)
    want[1], want[4] = [3, 4], [1, 2]
    numpy.testing.assert_array_equal(dense.asnumpy(), want)
    numpy.testing.assert_array_equal(a.asnumpy(), want)
    # shape defaults to the largest index + 1; dtype follows numpy data
    b = sparse.row_sparse_array((numpy.ones((1, 3), numpy.float64), [2]))
    assert b.shape == (3, 3) and b.dtype == numpy.float64
    assert sparse.zeros((4, 2)).indices.asnumpy().tolist() == []
    assert sparse.row_sparse_array((5, 2)).shape == (5, 2)


def test_row_sparse_array_errors():
    with pytest.raises(ValueError, match="more than once"):
        sparse.row_sparse_array(([[1], [2]], [3, 3]), shape=(5, 1))
    with pytest.raises(ValueError, match="one row per index"):
        sparse.row_sparse_array(([[1], [2]], [3]), shape=(5, 1))
    with pytest.raises(kvstore.InvalidArgumentError, match="outside"):
        sparse.row_sparse_array(([[1]], [7]), shape=(5, 1))
    with pytest.raises(ValueError, match="must be integers"):
        sparse.row_sparse_array(([[1]], [1.5]), shape=(5, 1))


def test_cast_from_dense_keeps_non_zero_rows():
    x = numpy.zeros((5, 3), numpy.float32)
    x[0, 2], x[3, 0] = 1, -2
    a = nd.array(x).tostype("row_sparse")
    assert a.stype == "row_sparse" and a.indices.asnumpy().tolist() == [0, 3]
    assert a.data.asnumpy().tolist() == [[0, 0, 1], [-2, 0, 0]]
    b = sparse.row_sparse_array(x)
    assert b.indices.asnumpy().tolist() == [0, 3]
    c = sparse.row_sparse_array(nd.array(x))
    numpy.testing.assert_array_equal(c.asnumpy(), x)
    assert a.tostype("row_sparse").indices.asnumpy().tolist() == [0, 3]  # a copy
    assert nd.array(x).stype == "default"
    with pytest.raises(ValueError, match="unknown storage type"):
        a.tostype("csr")


def test_dense_operations_refuse_row_sparse():
    a = sparse.row_sparse_array(([[1, 2]], [0]), shape=(2, 2))
    with pytest.raises(kvstore.NotSupportedError, match="row_sparse"):
        a + a
    with pytest.raises(kvstore.NotSupportedError, match="row_sparse"):
        nd.zeros((2, 2)).copyto(a)
    with pytest.raises(TypeError):
        a[0] = 1


@pytest.mark.parametrize("store_type", ["local", "device"])
def test_init_push_and_pull_dense(store_type):
    with kv.create(store_type) as store:
        store.init(3, sparse.row_sparse_array(([[1, 2]], [1]), shape=(4, 2)))
        out = nd.zeros((4, 2))
        store.pull(3, out=out)
        assert out.asnumpy().tolist() == [[0, 0], [1, 2], [0, 0], [0, 0]]
        # two values of one key: summed by the union of rows; assign zeroes the rest
        store.push(3, [sparse.row_sparse_array(([[1, 1]], [0]), shape=(4, 2)),
                       sparse.row_sparse_array(([[2, 2], [3, 3]], [0, 2]), shape=(4, 2))])
        store.pull(3, out=out)
        assert out.asnumpy().tolist() == [[3, 3], [0, 0], [3, 3], [0, 0]]
        with pytest.raises(kvstore.NotSupportedError, match="row_sparse"):
            store.pull(3, out=sparse.zeros((4, 2)))


def test_updater_receives_row_sparse():
    seen = []

    def updater(key, recv, stored):
        seen.append((key, type(recv).__name__, recv.stype, recv.indices.asnumpy().tolist(),
                     type(stored).__name__))
        stored[:] = stored.asnumpy() + recv.asnumpy()

    with kv.create("local") as store:
        store.init("w", nd.ones((3, 2)))
        store._set_updater(updater)
        store.push("w", sparse.row_sparse_array(([[5, 5]], [2]), shape=(3, 2)))
        assert seen == [("w", "RowSparseNDArray", "row_sparse", [2], "NDArray")]
        out = nd.zeros((3, 2))
        store.pull("w", out=out)
        assert out.asnumpy().tolist() == [[1, 1], [1, 1], [6, 6]]


def test_lazy_sgd_touches_pushed_rows_only():
    with kv.create("local") as store:
        store.init(0, nd.ones((4, 2)))
        store.set_optimizer(kvstore.optimizer.SGD(learning_rate=0.5, wd=0.1))
        store.push(0, sparse.row_sparse_array(([[1, 1]], [3]), shape=(4, 2)))
        out = nd.zeros((4, 2))
        store.pull(0, out=out)
        got = out.asnumpy()
        numpy.testing.assert_array_equal(got[:3], numpy.ones((3, 2)))
        numpy.testing.assert_allclose(got[3], [1 - 0.5 * (1 + 0.1)] * 2, rtol=1e-6)


def test_row_sparse_pull_shapes():
    with kv.create("local") as store:
        store.init(["a", "b"], [nd.array(table()), nd.array(table() * 10)])
        out = sparse.zeros((6, 2))
        # any order, duplicates, any integral dtype; the output's rows are replaced
        store.row_sparse_pull("a", out=out, row_ids=nd.array([5, 0, 5], dtype="int64"))
        assert out.indices.asnumpy().tolist() == [0, 5]
        assert out.data.asnumpy().tolist() == [[0, 1], [10, 11]]
        store.row_sparse_pull("a", out=out, row_ids=numpy.array([2.0], numpy.float32))
        assert out.indices.asnumpy().tolist() == [2]
        # one row_ids for many outputs (also as a list of one)
        outs = [sparse.zeros((6, 2)), sparse.zeros((6, 2))]
        store.row_sparse_pull("a", out=outs, row_ids=nd.array([1, 3]))
        assert [o.indices.asnumpy().tolist() for o in outs] == [[1, 3], [1, 3]]
        store.row_sparse_pull("b", out=outs, row_ids=[nd.array([4])])
        assert [o.data.asnumpy().tolist() for o in outs] == [[[80, 90]], [[80, 90]]]
        # lists of keys, each with its own outputs and row_ids
        oa, ob = sparse.zeros((6, 2)), [sparse.zeros((6, 2)), sparse.zeros((6, 2))]
        store.row_sparse_pull(["a", "b"], out=[oa, ob],
                              row_ids=[nd.array([0]), [nd.array([1]), nd.array([2, 1])]])
        assert oa.indices.asnumpy().tolist() == [0]
        assert [o.indices.asnumpy().tolist() for o in ob] == [[1], [1, 2]]
        assert ob[1].data.asnumpy().tolist() == [[20, 30], [40, 50]]


def test_row_sparse_pull_errors_change_nothing():
    with kv.create("local") as store:
        store.init(1, nd.array(table()))
        out = sparse.zeros((6, 2))
        store.row_sparse_pull(1, out=out, row_ids=nd.array([3]))
        with pytest.raises(kvstore.InvalidArgumentError, match="outside"):
            store.row_sparse_pull(1, out=out, row_ids=nd.array([0, 6]))
        with pytest.raises(kvstore.InvalidArgumentError, match="not an integer"):
            store.row_sparse_pull(1, out=out, row_ids=nd.array([0.5]))
        with pytest.raises(kvstore.InvalidArgumentError, match="not row_sparse"):
            store.row_sparse_pull(1, out=nd.zeros((6, 2)), row_ids=nd.array([0]))
        with pytest.raises(kvstore.ShapeMismatchError, match="row_sparse_pull of key 1"):
            store.row_sparse_pull(1, out=sparse.zeros((5, 2)), row_ids=nd.array([0]))
        with pytest.raises(ValueError, match="2 outputs but 3 row_ids"):
            store.row_sparse_pull(1, out=[out, out], row_ids=[nd.array([0])] * 3)
        with pytest.raises(TypeError, match="row_ids is required"):
            store.row_sparse_pull(1, out=out)
        assert out.indices.asnumpy().tolist() == [3]
        assert out.data.asnumpy().tolist() == [[6, 7]]
