"""NDArray / np.ndarray behaviour: creation, arithmetic, numpy interop, display, errors."""
import numpy
import pytest

import kvstore
from kvstore import cpu, gpu, nd, np


def test_creation_and_metadata():
    a = nd.zeros((2, 3))
    assert a.shape == (2, 3) and a.dtype == numpy.float32 and a.context == cpu(0)
    assert a.size == 6 and a.ndim == 2 and a.nbytes == 24 and len(a) == 2
    b = nd.ones(4, cpu(2), dtype="int64")
    assert b.shape == (4,) and b.dtype == numpy.int64 and b.ctx == cpu(2)
    numpy.testing.assert_array_equal(b.asnumpy(), numpy.ones(4, numpy.int64))
    c = nd.full((2,), 7.5, dtype="float64")
    numpy.testing.assert_array_equal(c.asnumpy(), [7.5, 7.5])
    s = nd.zeros(())
    assert s.shape == () and s.size == 1 and float(s) == 0.0
    e = nd.zeros((0, 3))
    assert e.size == 0 and e.asnumpy().shape == (0, 3)


def test_zero_dim_numpy_arrays_keep_their_shape():
    for src in (numpy.array(5.0), numpy.array(7, dtype=numpy.int64), numpy.float32(2.5)):
        a = nd.array(src)
        assert a.shape == () and a.ndim == 0 and a.size == 1, (src, a.shape)
        assert a.asnumpy().shape == () and a.asnumpy() == src
        b = np.array(src)
        assert b.shape == () and b.asnumpy() == src
    assert nd.array(numpy.array(5.0)).dtype == numpy.float64
    z = nd.zeros(())
    z[:] = numpy.array(3.0)
    assert z.shape == () and float(z) == 3.0
    with kvstore.kv.create("local") as s:  # 0-d values through a store
        s.init(1, numpy.array(1.5, dtype=numpy.float32))
        out = numpy.zeros((), dtype=numpy.float32)
        s.pull(1, out=out)
        assert out.shape == () and out == 1.5


def test_bad_creation_arguments():
    with pytest.raises(ValueError, match="negative"):
        nd.zeros((2, -1))
    with pytest.raises(TypeError, match="shape"):
        nd.zeros((2, "3"))
    with pytest.raises(ValueError, match="at most 32"):
        nd.zeros((1,) * 33)
    with pytest.raises(ValueError, match="tpu"):
        nd.zeros(3, ctx="tpu")
    with pytest.raises(TypeError):
        nd.zeros(3, ctx=1.5)
    with pytest.raises(ValueError):
        cpu(-1)
    with pytest.raises(TypeError):
        nd.ones(3, foo=1)
    with pytest.raises(ValueError, match="order"):
        np.zeros(3, order="F")


@pytest.mark.skipif(kvstore.num_gpus() > 0, reason="a GPU is present")
def test_gpu_context_without_gpu_is_a_device_error():
    with pytest.raises(kvstore.DeviceError) as info:
        nd.ones(3, gpu(0))
    assert info.value.message


def test_arithmetic():
    a = nd.array([[1, 2], [3, 4]])
    b = nd.ones((2, 2)) * 2
    x = a.asnumpy()
    numpy.testing.assert_array_equal((a + b).asnumpy(), x + 2)
    numpy.testing.assert_array_equal((a - b).asnumpy(), x - 2)
    numpy.testing.assert_array_equal((a * b).asnumpy(), x * 2)
    numpy.testing.assert_array_equal((a / b).asnumpy(), x / 2)
    numpy.testing.assert_array_equal((a + 1).asnumpy(), x + 1)
    numpy.testing.assert_array_equal((10 - a).asnumpy(), 10 - x)
    numpy.testing.assert_array_equal((12 / a).asnumpy(), (12 / x).astype(numpy.float32))
    numpy.testing.assert_array_equal((3 * a).asnumpy(), 3 * x)
    numpy.testing.assert_array_equal((-a).asnumpy(), -x)
    numpy.testing.assert_array_equal((a + numpy.ones((2, 2))).asnumpy(), x + 1)
    numpy.testing.assert_array_equal((numpy.ones((2, 2)) + a).asnumpy(), x + 1)
    c = a.copy()
    c += b
    c *= 3
    c -= 1
    c /= 2
    numpy.testing.assert_array_equal(c.asnumpy(), ((x + 2) * 3 - 1) / 2)
    numpy.testing.assert_array_equal(a.asnumpy(), x)  # copy() is independent
    ident = a
    a += 1
    assert a is ident  # in place


def test_arithmetic_errors():
    with pytest.raises(kvstore.ShapeMismatchError):
        nd.ones((2, 2)) + nd.ones((4,))
    with pytest.raises(kvstore.DtypeMismatchError):
        nd.ones(3) + nd.ones(3, dtype="float64")
    with pytest.raises(kvstore.InvalidArgumentError, match="division by zero"):
        nd.ones(3, dtype="int32") / 0
    with pytest.raises(TypeError):
        nd.ones(3) + "x"
    with pytest.raises(kvstore.DeviceError):
        nd.ones(3, cpu(0)) + nd.ones(3, cpu(1))


def test_integer_dtypes_arithmetic():
    a = nd.array(numpy.array([7, 8, 9], numpy.int32))
    numpy.testing.assert_array_equal((a / 2).asnumpy(), [3, 4, 4])
    u = nd.array(numpy.array([1, 2, 3], numpy.uint8))
    numpy.testing.assert_array_equal((u * 2).asnumpy(), [2, 4, 6])


def test_assignment_and_copies():
    a = nd.zeros((2, 3))
    a[:] = 5
    numpy.testing.assert_array_equal(a.asnumpy(), numpy.full((2, 3), 5))
    a[:] = numpy.arange(3)
    numpy.testing.assert_array_equal(a.asnumpy(), numpy.tile(numpy.arange(3), (2, 1)))
    b = nd.ones((2, 3))
    a[:] = b
    numpy.testing.assert_array_equal(a.asnumpy(), numpy.ones((2, 3)))
    with pytest.raises(ValueError, match="shape"):
        a[:] = numpy.ones(4)
    with pytest.raises(TypeError, match="first axis"):
        a[0, 1] = 1  # rows only (test_api_surface.py tests row indexing)
    c = a.copyto(cpu(1))
    assert c.context == cpu(1)
    numpy.testing.assert_array_equal(c.asnumpy(), a.asnumpy())
    d = nd.zeros((2, 3))
    assert a.copyto(d) is d
    numpy.testing.assert_array_equal(d.asnumpy(), a.asnumpy())
    assert a.as_in_context(cpu(0)) is a
    e = a.astype("int32")
    assert e.dtype == numpy.int32
    numpy.testing.assert_array_equal(numpy.asarray(e), numpy.ones((2, 3), numpy.int32))


def test_zero_copy_view_shares_memory():
    a = nd.zeros((2, 2))
    v = a.asnumpy(copy=False)
    v[0, 0] = 42
    assert a.asnumpy()[0, 0] == 42
    a += 1
    assert v[1, 1] == 1 and v[0, 0] == 43
    copy = a.asnumpy()
    copy[:] = 0
    assert a.asnumpy()[0, 0] == 43


def test_float16_values():
    src = numpy.array([0.5, -2.25, 65504], numpy.float16)
    a = nd.array(src)
    assert a.dtype == numpy.float16
    numpy.testing.assert_array_equal(a.asnumpy(), src)
    numpy.testing.assert_array_equal((a * 2).asnumpy()[:2], src[:2] * 2)


def test_nd_display():
    a = nd.ones((2, 3)) * 2
    assert repr(a) == "\n[[2. 2. 2.]\n [2. 2. 2.]]\n<NDArray 2x3 @cpu(0)>"


def test_np_display_like_numpy():
    a = np.ones((2, 3)) * (-2)
    assert isinstance(a, np.ndarray) and isinstance(a, nd.NDArray)
    assert repr(a) == "array([[-2., -2., -2.],\n       [-2., -2., -2.]])"
    assert str(a) == "[[-2. -2. -2.]\n [-2. -2. -2.]]"
    b = np.array([1, 2, 3], dtype="int32")
    assert repr(b) == "array([1, 2, 3], dtype=int32)"
    assert repr(np.full((2,), 0.5, ctx=cpu(1))) == "array([0.5, 0.5])"
    assert isinstance(a + 1, np.ndarray) and isinstance(1 - a, np.ndarray)


def test_scalar_conversions():
    assert nd.full((1,), 3).asscalar() == 3.0
    assert int(nd.full((), 5, dtype="int64")) == 5
    with pytest.raises(ValueError):
        bool(nd.ones(2))
    with pytest.raises(ValueError):
        nd.ones(2).asscalar()
