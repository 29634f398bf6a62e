"""``kvstore.np``: numpy-flavoured arrays, as ``mx.np``.

Arrays of this module are NDArrays (they work everywhere an NDArray does) whose ``repr`` and
``str`` read like numpy's: ``array([[-2., -2., -2.], ...])``. Creation functions take
numpy's argument order, ``np.ones(shape, dtype=None, order='C', ctx=None)``.
"""
import numpy as _numpy

from .context import Context, cpu, gpu  # noqa: F401
from .ndarray import NDArray, _array, _create, _DEFAULT_DTYPE
from ._lib import LIB
from .errors import check_call

__all__ = ["ndarray", "array", "empty", "zeros", "ones", "full", "Context", "cpu", "gpu"]


class ndarray(NDArray):  # noqa: N801 (numpy's spelling)
    """A numpy-flavoured NDArray."""

    __slots__ = ()

    def __repr__(self):
        if self.closed:
            return "<ndarray (closed)>"
        a = self.asnumpy()
        body = _numpy.array2string(a, separator=", ", prefix="array(")
        extra = ""
        if a.dtype != _DEFAULT_DTYPE:
            extra += ", dtype=%s" % a.dtype
        if self.context.device_type != "cpu":
            extra += ", ctx=%s" % self.context
        return "array(%s%s)" % (body, extra)

    def __str__(self):
        if self.closed:
            return "<ndarray (closed)>"
        return str(self.asnumpy())


def _check_order(order):
    if order != "C":
        raise ValueError("only C order is supported, got order=%r" % (order,))


def empty(shape, dtype=None, order="C", ctx=None):
    """A new array (zero-filled)."""
    _check_order(order)
    return _create(shape, ctx, dtype, ndarray)


def zeros(shape, dtype=None, order="C", ctx=None):
    """A new array of zeros; dtype float32 by default, ctx cpu(0) by default."""
    _check_order(order)
    return _create(shape, ctx, dtype, ndarray)


def full(shape, fill_value, dtype=None, order="C", ctx=None):
    """A new array with every element fill_value."""
    _check_order(order)
    out = _create(shape, ctx, dtype, ndarray)
    check_call(LIB.KVArrayFill(out._ref, float(fill_value)))
    return out


def ones(shape, dtype=None, order="C", ctx=None):
    """A new array of ones."""
    return full(shape, 1, dtype, order, ctx)


def array(object, dtype=None, ctx=None):  # noqa: A002 (numpy's parameter name)
    """A new array with a copy of object (numpy array, nested lists, NDArray)."""
    return _array(object, ctx, dtype, ndarray)
