"""``kvstore.nd.sparse``: row-sparse arrays, as ``mx.nd.sparse``.

A :class:`RowSparseNDArray` of logical shape ``(R, d1, ..., dk)`` stores only some rows: their
ids (``indices``, int64, increasing) and a dense block of those rows (``data``, shape
``(n, d1, ..., dk)``); every other row reads as zero. It lives in host memory.

    >>> from kvstore import nd
    >>> a = nd.sparse.row_sparse_array(([[1, 2], [3, 4]], [4, 1]), shape=(6, 2))
    >>> a.indices.asnumpy()
    array([1, 4])
    >>> a.tostype('default').asnumpy()[1]
    array([3., 4.], dtype=float32)

Stores take row-sparse values in ``init`` and ``push`` (``local`` and ``device``), and
``row_sparse_pull`` writes row-sparse outputs. Element-wise arithmetic, ``copyto`` and row
indexing are dense operations: cast first with ``tostype('default')``.
"""
import numbers
from ctypes import POINTER, byref, c_int, c_int64, c_void_p

import numpy

from ._lib import LIB, KVArrayHandle
from .context import Context, current_context, cpu
from .errors import check_call
from .ndarray import NDArray, _from_numpy, _norm_shape, dtype_code, dtype_to_numpy

__all__ = ["RowSparseNDArray", "row_sparse_array", "zeros", "STYPE_DEFAULT", "STYPE_ROW_SPARSE",
           "stype_of", "cast_storage"]

STYPE_DEFAULT, STYPE_ROW_SPARSE = 0, 1
_STYPE_NAMES = {"default": STYPE_DEFAULT, "row_sparse": STYPE_ROW_SPARSE}


def stype_of(handle):
    """The storage type name ('default' or 'row_sparse') of an array handle (or _Handle)."""
    code = c_int(0)
    check_call(LIB.KVArrayGetStorageType(handle, byref(code)))
    return "row_sparse" if code.value == STYPE_ROW_SPARSE else "default"


def cast_storage(array, stype):
    """A new array of storage type `stype` ('default' or 'row_sparse') with the contents of
    `array`; dense to row_sparse keeps the rows that have a non-zero element."""
    if stype not in _STYPE_NAMES:
        raise ValueError("unknown storage type %r; known: 'default', 'row_sparse'" % (stype,))
    out = KVArrayHandle()
    check_call(LIB.KVArrayCastStorage(array._ref, _STYPE_NAMES[stype], byref(out)))
    return RowSparseNDArray(out) if stype == "row_sparse" else NDArray(out)


class RowSparseNDArray(NDArray):
    """A row-sparse array (see the module documentation). ``shape``, ``size``, ``dtype`` and
    ``context`` are the logical array's; ``nbytes`` is the size of the data block."""

    __slots__ = ()

    @property
    def stype(self):
        return "row_sparse"

    @property
    def num_rows(self):
        """The number of stored rows."""
        n = c_int64(0)
        check_call(LIB.KVArrayGetNumRows(self._ref, byref(n)))
        return n.value

    @property
    def indices(self):
        """The stored row ids: a new 1-d int64 NDArray, increasing."""
        n = self.num_rows
        ids = numpy.empty(n, dtype=numpy.int64)
        check_call(LIB.KVArrayGetRowIds(self._ref, ids.ctypes.data_as(POINTER(c_int64)) if n else None, n))
        return _from_numpy(ids, cpu(0), NDArray)

    def _block(self):
        """The data block as a new numpy array of shape (num_rows, d1, ..., dk)."""
        shape, dtype, _ = self._query_meta()
        block = numpy.empty((self.num_rows,) + shape[1:], dtype=dtype)
        if block.nbytes:
            check_call(LIB.KVArrayCopyToHost(self._ref, block.ctypes.data_as(c_void_p),
                                             block.nbytes))
        return block

    @property
    def data(self):
        """The stored rows: a new dense NDArray of shape (num_rows, d1, ..., dk)."""
        return _from_numpy(self._block(), self.context, NDArray)

    def tostype(self, stype):
        """A new array of storage type 'default' (dense: absent rows are zero) or
        'row_sparse' (a copy)."""
        return cast_storage(self, stype)

    def asnumpy(self, copy=True):
        """The logical contents as a dense numpy array (always a copy)."""
        if not copy:
            raise ValueError("a RowSparseNDArray has no zero-copy view of its logical "
                             "contents; use asnumpy() or .data")
        dense = self.tostype("default")
        try:
            return dense.asnumpy()
        finally:
            dense.close()

    def copy(self):
        return self.tostype("row_sparse")

    def __getitem__(self, key):
        if self._is_whole(key):
            return self
        raise TypeError("RowSparseNDArray supports a[:] only; index a.tostype('default') or "
                        "a.data for rows")

    def __setitem__(self, key, value):
        raise TypeError("RowSparseNDArray cannot be assigned to; build a new one with "
                        "nd.sparse.row_sparse_array")

    def __repr__(self):
        if self.closed:
            return "<RowSparseNDArray (closed)>"
        shape, _, ctx = self._query_meta()
        return "\n%s\n<RowSparseNDArray %s @%s>" % (str(self.asnumpy()),
                                                    "x".join(str(d) for d in shape), ctx)

    __str__ = __repr__


def _create_rsp(shape, ids, ctx, dtype):
    shape = _norm_shape(shape)
    if not shape:
        raise ValueError("a row_sparse array needs at least one dimension")
    ctx = current_context() if ctx is None else Context(ctx)
    dims = (c_int64 * len(shape))(*shape)
    ids = numpy.ascontiguousarray(ids, dtype=numpy.int64)
    c_ids = (c_int64 * max(len(ids), 1))(*ids.tolist())
    out = KVArrayHandle()
    check_call(LIB.KVArrayCreateRowSparse(dims, len(shape), dtype_code(dtype), ctx.device_typeid,
                                          ctx.device_id, c_ids, len(ids), byref(out)))
    return RowSparseNDArray(out)


def zeros(shape, ctx=None, dtype=None):
    """A row-sparse array with no stored rows."""
    return _create_rsp(shape, [], ctx, dtype)


def _is_shape(arg):
    return (isinstance(arg, numbers.Integral) and not isinstance(arg, bool)) or (
        isinstance(arg, tuple) and all(isinstance(d, numbers.Integral) and not isinstance(d, bool)
                                       for d in arg))


def row_sparse_array(arg1, shape=None, ctx=None, dtype=None):
    """A new :class:`RowSparseNDArray`, as ``mx.nd.sparse.row_sparse_array``, from:

    - ``(data, indices)``: the rows ``data`` (array-like of shape (n, d1, ..., dk)) at row ids
      ``indices`` (n integers, any order, no repeats); ``shape`` defaults to
      ``(max(indices) + 1, d1, ..., dk)``;
    - a dense NDArray or numpy array (or nested lists): the rows with a non-zero element;
    - a RowSparseNDArray: a copy;
    - a shape (an int or a tuple of ints): no stored rows.
    ``dtype`` defaults to the data's for numpy arrays and NDArrays, else float32.
    """
    if isinstance(arg1, RowSparseNDArray):
        out = arg1.copy()
        if dtype is not None and dtype_to_numpy(dtype) != out.dtype:
            return row_sparse_array((out._block().astype(dtype_to_numpy(dtype)),
                                     out.indices.asnumpy()), shape=out.shape, ctx=ctx)
        return out
    if _is_shape(arg1):
        return zeros(arg1, ctx, dtype)
    if isinstance(arg1, tuple) and len(arg1) == 2:
        return _from_data_indices(arg1[0], arg1[1], shape, ctx, dtype)
    dense = arg1 if isinstance(arg1, NDArray) and dtype is None else None
    if dense is None:
        from .ndarray import _array
        dense = _array(arg1, cpu(0) if ctx is None else ctx, dtype, NDArray)
    if shape is not None and _norm_shape(shape) != dense.shape:
        raise ValueError("row_sparse_array: shape %r differs from the dense source's %r"
                         % (shape, dense.shape))
    return cast_storage(dense, "row_sparse")


def _from_data_indices(data, indices, shape, ctx, dtype):
    src = data.asnumpy() if isinstance(data, NDArray) else numpy.asarray(data)
    if dtype is None:
        dtype = src.dtype if isinstance(data, (numpy.ndarray, NDArray)) else numpy.float32
    dtype = dtype_to_numpy(dtype)
    ids = indices.asnumpy() if isinstance(indices, NDArray) else numpy.asarray(indices)
    ids = ids.reshape(-1)
    if ids.size and (ids.dtype.kind not in "iuf" or not numpy.all(numpy.equal(numpy.mod(ids, 1), 0))):
        raise ValueError("row_sparse_array: indices must be integers, got %r" % (ids,))
    ids = ids.astype(numpy.int64)
    if src.ndim == 0 or src.shape[0] != ids.size:
        raise ValueError("row_sparse_array: data of shape %r does not hold one row per index "
                         "(%d indices)" % (src.shape, ids.size))
    order = numpy.argsort(ids, kind="stable")
    ids, src = ids[order], src[order]
    if ids.size > 1 and numpy.any(ids[1:] == ids[:-1]):
        raise ValueError("row_sparse_array: index %d appears more than once"
                         % ids[1:][ids[1:] == ids[:-1]][0])
    if shape is None:
        shape = (int(ids[-1]) + 1 if ids.size else 0,) + src.shape[1:]
    shape = _norm_shape(shape)
    if shape[1:] != src.shape[1:]:
        raise ValueError("row_sparse_array: rows of shape %r do not fit shape %r"
                         % (src.shape[1:], shape))
    out = _create_rsp(shape, ids, ctx, dtype)
    block = numpy.ascontiguousarray(src, dtype=dtype)
    if block.nbytes:
        check_call(LIB.KVArrayCopyFromHost(out._ref, block.ctypes.data_as(c_void_p), block.nbytes))
    return out
