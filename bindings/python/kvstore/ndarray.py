"""NDArray: a dense n-dimensional array held by libkvstore, as ``mx.nd.NDArray``.

Arrays own a library handle that is released deterministically: by :meth:`NDArray.close`,
at the end of a ``with`` block, or when the last Python reference goes away (CPython frees
objects as soon as they become unreachable). A zero-copy numpy view from
``asnumpy(copy=False)`` keeps the memory alive on its own, so closing an array whose view is
still in use releases the handle when the last view is gone instead of leaving the view
dangling. A library call that was given the array holds it the same way: ``close()`` from
another thread (or from an updater) while such a call runs takes effect when the call
returns, never under it.
"""
import numbers
import sys
import threading
from ctypes import byref, c_int, c_int64, c_size_t, c_void_p

import numpy

from ._lib import LIB, KVArrayHandle
from .context import Context, current_context
from .errors import check_call

__all__ = ["NDArray", "empty", "zeros", "ones", "full", "array", "dtype_code", "SUPPORTED_DTYPES"]

KV_MAX_NDIM = 32

# KVBinaryOp
OP_ADD, OP_SUB, OP_MUL, OP_DIV = 0, 1, 2, 3

# KVDType codes <-> numpy dtypes, derived from the library: every code in [0, 16) that
# KVDTypeName names, under the numpy dtype of that name. A library dtype numpy has no name for
# is not offered.
def _dtype_table():
    table = {}
    for code in range(16):
        name = LIB.KVDTypeName(code)
        if name is None:
            continue
        try:
            table[code] = numpy.dtype(name.decode("ascii"))
        except TypeError:
            continue
    return table


_CODE_TO_DTYPE = _dtype_table()
_DTYPE_TO_CODE = {dt: code for code, dt in _CODE_TO_DTYPE.items()}
#: The numpy dtypes an NDArray can hold.
SUPPORTED_DTYPES = tuple(_CODE_TO_DTYPE.values())
_DEFAULT_DTYPE = numpy.dtype(numpy.float32)


def dtype_code(dtype):
    """The KVDType code of a numpy dtype (or anything numpy.dtype accepts)."""
    if dtype is None:
        dtype = _DEFAULT_DTYPE
    try:
        dt = numpy.dtype(dtype)
    except TypeError:
        raise TypeError("dtype %r is not a data type" % (dtype,)) from None
    if not dt.isnative:
        dt = dt.newbyteorder("=")
    try:
        return _DTYPE_TO_CODE[dt]
    except KeyError:
        raise TypeError("dtype %s is not supported; NDArray dtypes are %s"
                        % (dt, ", ".join(str(d) for d in SUPPORTED_DTYPES))) from None


def _norm_shape(shape):
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError("shape must be an int or a sequence of ints, not %s"
                        % type(shape).__name__) from None
    out = []
    for i, d in enumerate(dims):
        if not isinstance(d, numbers.Integral) or isinstance(d, bool):
            raise TypeError("shape[%d] must be an int, not %s (shape %r)"
                            % (i, type(d).__name__, dims))
        if d < 0:
            raise ValueError("shape[%d] is negative (shape %r)" % (i, dims))
        out.append(int(d))
    if len(out) > KV_MAX_NDIM:
        raise ValueError("an NDArray has at most %d dimensions; shape %r has %d"
                         % (KV_MAX_NDIM, dims, len(out)))
    return tuple(out)


def _is_scalar(x):
    if isinstance(x, (bool, numpy.bool_, complex, numpy.complexfloating)):
        return False
    return isinstance(x, (numbers.Real, numpy.integer, numpy.floating))


class _Handle(object):
    """Owner of one KVArrayHandle. Owned handles are freed exactly once, when this object is
    collected (``release`` is called only from there and for borrowed handles). Borrowed
    handles (updater arguments) are never freed and become invalid when the callback returns.

    Invariant: every library call on an array is passed this object, not the bare pointer
    (ctypes converts it through ``_as_parameter_``). The call's argument tuple then holds a
    reference until the call returns, so the handle cannot be freed under a running call,
    whatever another thread does to the NDArray meanwhile (ctypes releases the GIL for the
    call, so a check-then-call on the bare pointer would leave that window open).

    ``cptr`` is the handle's value as the native bytes of a C pointer (None exactly when
    ``ptr`` is): the store's hot paths pass it, or several of them joined, as the
    ``const KVArrayHandle*`` argument without building a ctypes array. A caller using it holds
    this object until the call returns, as above."""

    __slots__ = ("ptr", "cptr", "owned", "why_invalid", "__weakref__")

    def __init__(self, ptr, owned):
        self.ptr = ptr
        self.cptr = bytes(ptr) if ptr else None
        self.owned = owned
        self.why_invalid = None

    @property
    def _as_parameter_(self):
        return self.ptr

    def release(self, why, _free=LIB.KVArrayFree):
        ptr, self.ptr, self.cptr = self.ptr, None, None
        if self.why_invalid is None:
            self.why_invalid = why
        if ptr and self.owned:
            _free(ptr)

    def __del__(self):
        try:
            self.release("freed")
        except Exception:  # interpreter shutdown: nothing sensible left to do
            pass


# Packed handle lists of the store's list hot paths (kv._fast_arrays): a tuple of NDArrays that
# was passed as a list of values or outputs more than once -> (their _Handles, the _Handles'
# cptr bytes joined), so that a repeated list costs one tuple() and one dict lookup (hash and
# identity compare in C) instead of reading every array's handle.
#
# Invariant: every NDArray in a key is open and owns its handle, and its _h is the entry's
# _Handle. close() of an NDArray in a key clears the table first (_PACKED_IDS), so the closed
# array is freed as before, and a list is checked again once it is in the table (a close()
# on another thread between the call reading the handles and the recording found nothing
# to clear); only owned handles are recorded (a borrowed one is invalidated
# without close()), and an owned _Handle is released only when collected, which the entry
# prevents. A call takes an entry's _Handles into a local before the library call, so a
# clearing meanwhile frees nothing under a running call. Recording and clearing hold
# _PACKED_LOCK, so neither sees the other half done (a list recorded between a clear's two
# steps would stay in _PACKED with its ids gone from _PACKED_IDS, and a close() of one of its
# arrays would then clear nothing); lookups read _PACKED without it (a dict get is atomic
# under the GIL).
#
# The keys hold their NDArrays: an array the caller dropped stays alive while a recorded list
# holds it, until the table is cleared. It is cleared when it is full (_PACKED_MAX lists), when
# one of its arrays is closed, when a store is closed, and of the lists whose arrays only it
# still holds (sys.getrefcount) each time a list is recorded; calls of one key or of lists
# already recorded clear nothing. (Keys of ids with weak references, which would release a
# dropped array at once, cost a list of 100 arrays 1.8x per key: an int object per id.)
_PACKED = {}
_PACKED_IDS = set()   # ids of the NDArrays in _PACKED's keys
_PACKED_SEEN = {}     # hash of a tuple of NDArrays seen once -> None (holds no array)
_PACKED_MAX = 8
_PACKED_LEN = 1 << 20  # longer lists are not recorded


_PACKED_LOCK = threading.RLock()  # the table's updates; re-entered by a clear from a GC'd store


def _forget_packed():
    """Drops every recorded list."""
    with _PACKED_LOCK:
        _PACKED_IDS.clear()
        _PACKED.clear()


def _remember_packed(arrays, handles, packed):
    """Records (handles, packed) under the tuple `arrays` the second time a tuple of that hash
    is passed; never a list with a borrowed handle or a longer one than _PACKED_LEN."""
    if len(arrays) > _PACKED_LEN:
        return
    try:
        h = hash(arrays)
    except TypeError:
        return
    if h not in _PACKED_SEEN:
        if len(_PACKED_SEEN) >= 4 * _PACKED_MAX:
            _PACKED_SEEN.clear()
        _PACKED_SEEN[h] = None
        return
    if not all([isinstance(a, NDArray) for a in arrays]) or not all([x.owned for x in handles]):
        return
    with _PACKED_LOCK:
        # Lists whose arrays only the table holds (the key, and getrefcount's argument) go now.
        for key in list(_PACKED):
            # References when only the table holds a: the key, the loop variable, the argument.
            if any([sys.getrefcount(a) <= 3 for a in key]):
                _forget_packed()
                break
        if len(_PACKED) >= _PACKED_MAX:
            _forget_packed()
        _PACKED_IDS.update(map(id, arrays))
        _PACKED[arrays] = (handles, packed)
        # A close() on another thread after the handles were read found nothing to clear, and
        # a clear re-entered on this thread (a store collected meanwhile) may have dropped the
        # ids: either way the list must not stay in the table.
        if not all([a._h is x for a, x in zip(arrays, handles)]) or \
                not all([i in _PACKED_IDS for i in map(id, arrays)]):
            _forget_packed()


class _HostView(object):
    """numpy's handle on an array's host memory; keeps the owning _Handle alive."""

    __slots__ = ("_owner", "__array_interface__")

    def __init__(self, owner, ptr, shape, dtype):
        self._owner = owner
        self.__array_interface__ = {"data": (ptr, False), "shape": shape,
                                    "typestr": dtype.str, "version": 3}


class NDArray(object):
    """An n-dimensional array of one dtype on one device, held by libkvstore.

    Create arrays with :func:`empty`, :func:`zeros`, :func:`ones`, :func:`full` or
    :func:`array`. Arithmetic ``+ - * /`` (with an NDArray, a scalar or a numpy array) makes
    a new array; ``+= -= *= /=`` work in place. Operands must share shape, dtype and context.
    """

    __slots__ = ("_h", "_meta", "__weakref__")
    __array_priority__ = 1000.0
    __array_ufunc__ = None  # numpy defers `ndarray op NDArray` to our reflected operators

    def __init__(self, handle, owned=True):
        if not isinstance(handle, KVArrayHandle) or not handle:
            raise TypeError("NDArray() takes a non-NULL KVArrayHandle; use kvstore.nd.zeros, "
                            "ones, empty, full or array to create arrays")
        self._h = _Handle(handle, owned)
        self._meta = None

    # -- handle management ------------------------------------------------------------------
    @classmethod
    def _borrow(cls, handle):
        """A non-owning array over a handle lent by the library for one callback (a
        RowSparseNDArray when the handle is row_sparse)."""
        from .sparse import RowSparseNDArray, stype_of
        if stype_of(handle) == "row_sparse":
            cls = RowSparseNDArray
        obj = cls.__new__(cls)
        obj._h = _Handle(handle, False)
        obj._meta = None
        return obj

    @property
    def handle(self):
        """The KVArrayHandle; ValueError once the array is closed. A caller that passes it
        to the library itself must keep the array open until the call returns."""
        return self._ref.ptr

    @property
    def _ref(self):
        """The live _Handle, to be passed to a library call (see _Handle); ValueError once
        the array is closed."""
        h = self._h
        if h is None:
            raise ValueError("operation on a closed NDArray")
        if not h.ptr:
            if h.why_invalid == "borrowed":
                raise ValueError("this NDArray was lent to an updater for the duration of the "
                                 "call and is no longer valid; copy it (a.copy()) to keep it")
            raise ValueError("operation on a closed NDArray")
        return h

    @property
    def closed(self):
        h = self._h  # read once: close() on another thread may clear it meanwhile
        return h is None or not h.ptr

    def close(self):
        """Releases the library array now (or, when a zero-copy numpy view of it is alive,
        or a library call given it is still running, when the last of those ends). Further
        use raises ValueError. Idempotent."""
        h, self._h = self._h, None
        if id(self) in _PACKED_IDS:
            _forget_packed()
        if h is not None and h.owned:
            # Other holders of h are zero-copy views and running calls only: dropping our
            # reference frees the handle now unless one of them is still alive.
            del h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _invalidate_borrowed(self):
        h = self._h
        if h is not None:
            h.release("borrowed")

    # -- metadata ---------------------------------------------------------------------------
    def _query_meta(self):
        if self._meta is None:
            h = self._ref
            ndim = c_int(0)
            dims = (c_int64 * KV_MAX_NDIM)()
            check_call(LIB.KVArrayGetShape(h, dims, KV_MAX_NDIM, byref(ndim)))
            code = c_int(0)
            check_call(LIB.KVArrayGetDType(h, byref(code)))
            dev_type, dev_id = c_int(0), c_int(0)
            check_call(LIB.KVArrayGetContext(h, byref(dev_type), byref(dev_id)))
            shape = tuple(dims[i] for i in range(ndim.value))
            self._meta = (shape, _CODE_TO_DTYPE[code.value],
                          Context(dev_type.value, dev_id.value))
        else:
            self._ref  # raise if closed
        return self._meta

    @property
    def shape(self):
        return self._query_meta()[0]

    @property
    def dtype(self):
        """The numpy dtype of the elements."""
        return self._query_meta()[1]

    @property
    def context(self):
        return self._query_meta()[2]

    ctx = context

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def stype(self):
        """The storage type: 'default' (dense; 'row_sparse' for a RowSparseNDArray)."""
        return "default"

    def tostype(self, stype):
        """A new array of storage type 'default' (a copy) or 'row_sparse' (the rows that
        have a non-zero element; see kvstore.nd.sparse)."""
        from .sparse import cast_storage
        return cast_storage(self, stype)

    @property
    def size(self):
        n = c_int64(0)
        check_call(LIB.KVArrayGetSize(self._ref, byref(n)))
        return n.value

    @property
    def nbytes(self):
        n = c_size_t(0)
        check_call(LIB.KVArrayGetNBytes(self._ref, byref(n)))
        return n.value

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d NDArray")
        return shape[0]

    # -- host memory ------------------------------------------------------------------------
    def asnumpy(self, copy=True):
        """The contents as a numpy array.

        ``copy=True`` (default) returns an independent copy. ``copy=False`` returns a zero-copy
        view of the array's host memory (CPU arrays only; writes through the view change the
        array). The view keeps the memory alive even after :meth:`close`.
        """
        shape, dtype, _ = self._query_meta()
        if copy:
            out = numpy.empty(shape, dtype=dtype)
            if out.nbytes:
                check_call(LIB.KVArrayCopyToHost(self._ref, out.ctypes.data_as(c_void_p),
                                                 out.nbytes))
            return out
        h = self._ref  # the view holds this owner, whatever close() does meanwhile
        if not h.owned:
            raise ValueError("an array lent to an updater has no zero-copy view (it is valid "
                             "only during the call); use asnumpy() for a copy")
        ptr = c_void_p()
        check_call(LIB.KVArrayGetData(h, byref(ptr)))
        if not ptr.value:
            return numpy.empty(shape, dtype=dtype)
        return numpy.asarray(_HostView(h, ptr.value, shape, dtype))

    def __array__(self, dtype=None):
        a = self.asnumpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def asscalar(self):
        """The value of a one-element array as a Python scalar."""
        if self.size != 1:
            raise ValueError("asscalar() needs an array of one element, shape is %r"
                             % (self.shape,))
        return self.asnumpy().reshape(()).item()

    def __float__(self):
        return float(self.asscalar())

    def __int__(self):
        return int(self.asscalar())

    def __bool__(self):
        if self.size != 1:
            raise ValueError("the truth value of an NDArray with more than one element is "
                             "ambiguous")
        return bool(self.asscalar())

    def _copy_from(self, value):
        """Writes value (a scalar, an NDArray or anything numpy can broadcast) into self."""
        if isinstance(value, NDArray):
            check_call(LIB.KVArrayCopy(self._ref, value._ref))
        elif _is_scalar(value):
            check_call(LIB.KVArrayFill(self._ref, float(value)))
        else:
            shape, dtype, _ = self._query_meta()
            src = numpy.asarray(value)
            if src.dtype.kind not in "biuf":
                raise TypeError("cannot copy a %s array into an NDArray" % src.dtype)
            try:
                src = numpy.broadcast_to(src, shape)
            except ValueError:
                raise ValueError("cannot copy an array of shape %r into an NDArray of shape %r"
                                 % (numpy.shape(value), shape)) from None
            src = numpy.asarray(src, dtype=dtype, order="C")
            if src.nbytes:
                check_call(LIB.KVArrayCopyFromHost(self._ref, src.ctypes.data_as(c_void_p),
                                                   src.nbytes))
        return self

    # -- row indexing -----------------------------------------------------------------------
    # Basic indexing along the first axis: a[i] (negative i counts from the end), a[i:j] and
    # a[i:j:k]. Reading gives a new array (a copy, on the same context, of the same class);
    # assigning writes those rows of this array. a[:] and a[...] are the array itself. The
    # rows travel through host memory: for an owned CPU array through its zero-copy view, for
    # other arrays (GPU, lent to an updater) through a copy of the whole array.

    @staticmethod
    def _is_whole(key):
        return key is Ellipsis or (isinstance(key, slice) and key == slice(None))

    def _row_index(self, key):
        """key as an int or a slice along axis 0 (IndexError/TypeError when it is not one)."""
        shape = self.shape
        if not shape:
            raise IndexError("a 0-d NDArray has no rows to index (index %r)" % (key,))
        if isinstance(key, slice):
            for part in (key.start, key.stop, key.step):
                if part is not None and (isinstance(part, bool)
                                         or not isinstance(part, numbers.Integral)):
                    raise TypeError("slice bounds must be ints or None, got %r" % (key,))
            if key.step == 0:
                raise ValueError("slice step cannot be zero")
            return key
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            i = int(key)
            if not -shape[0] <= i < shape[0]:
                raise IndexError("index %d is out of range for axis 0 of size %d" % (i, shape[0]))
            return i + shape[0] if i < 0 else i
        raise TypeError("NDArray supports indexing rows along the first axis only: a[i], "
                        "a[i:j], a[i:j:k], a[:] (got index %r); for other indexing use "
                        "a.asnumpy()[...]" % (key,))

    def _host_rows(self):
        """(numpy array of the contents, whether writes to it change this array)."""
        h = self._ref
        if h.owned and self.context.device_type == "cpu":
            return self.asnumpy(copy=False), True
        return self.asnumpy(), False

    def __getitem__(self, key):
        if self._is_whole(key):
            return self
        index = self._row_index(key)
        host, _ = self._host_rows()
        _, _, ctx = self._query_meta()
        return _from_numpy(host[index], ctx, type(self))

    def __setitem__(self, key, value):
        if self._is_whole(key):
            self._copy_from(value)
            return
        index = self._row_index(key)
        host, in_place = self._host_rows()
        target = host[index]
        if isinstance(value, NDArray):
            src = value.asnumpy()
        elif _is_scalar(value):
            src = numpy.asarray(value)
        else:
            src = numpy.asarray(value)
            if src.dtype.kind not in "biuf":
                raise TypeError("cannot assign a %s array to NDArray rows" % src.dtype)
        try:
            src = numpy.broadcast_to(src, numpy.shape(target))
        except ValueError:
            raise ValueError("cannot assign an array of shape %r to rows %r of shape %r"
                             % (src.shape, key, numpy.shape(target))) from None
        if host.dtype.kind in "iu" and src.size and src.dtype.kind in "iuf":
            # As KVArrayFill: integers truncate toward zero; values they cannot hold are refused.
            info = numpy.iinfo(host.dtype)
            if not (numpy.all(numpy.isfinite(src)) and src.min() >= info.min
                    and src.max() <= info.max):
                raise ValueError("cannot assign values outside the range of %s (%d to %d)"
                                 % (host.dtype, info.min, info.max))
        host[index] = src.astype(host.dtype, copy=False)
        if not in_place and host.nbytes:
            check_call(LIB.KVArrayCopyFromHost(self._ref, host.ctypes.data_as(c_void_p),
                                               host.nbytes))

    # -- copies -----------------------------------------------------------------------------
    def _empty_like(self, ctx=None, cls=None):
        shape, dtype, own_ctx = self._query_meta()
        return _create(shape, ctx if ctx is not None else own_ctx, dtype, cls or type(self))

    def copy(self):
        """A new array with the same contents, shape, dtype and context."""
        out = self._empty_like()
        check_call(LIB.KVArrayCopy(out._ref, self._ref))
        return out

    def copyto(self, other):
        """Copies into another NDArray (returned), or into a new array on a Context."""
        if isinstance(other, NDArray):
            if other is self:
                return other
            check_call(LIB.KVArrayCopy(other._ref, self._ref))
            return other
        if isinstance(other, Context):
            out = self._empty_like(ctx=other)
            check_call(LIB.KVArrayCopy(out._ref, self._ref))
            return out
        raise TypeError("copyto() takes an NDArray or a Context, not %s" % type(other).__name__)

    def as_in_context(self, ctx):
        """self if it already lives on ctx, else a copy on ctx."""
        ctx = Context(ctx)
        return self if self.context == ctx else self.copyto(ctx)

    def astype(self, dtype):
        """A copy converted to dtype (through host memory)."""
        return _from_numpy(self.asnumpy().astype(dtype_to_numpy(dtype)), self.context,
                           type(self))

    def wait_to_read(self):
        """Blocks until pending asynchronous writes (distributed pulls) have finished."""
        check_call(LIB.KVArrayWaitToRead(self._ref))

    # -- arithmetic -------------------------------------------------------------------------
    def _operand(self, other):
        """other as an NDArray compatible with self, or None if not an array-like."""
        if isinstance(other, NDArray):
            return other
        if isinstance(other, (numpy.ndarray, list, tuple)):
            shape, dtype, ctx = self._query_meta()
            src = numpy.asarray(other)
            if src.dtype.kind not in "biuf":
                return None
            try:
                src = numpy.broadcast_to(src, shape)
            except ValueError:
                raise ValueError("operand of shape %r does not broadcast to the NDArray shape %r"
                                 % (src.shape, shape)) from None
            return _from_numpy(src.astype(dtype, copy=False), ctx, NDArray)
        return None

    def _binary(self, other, op, out=None, reverse=False):
        if _is_scalar(other):
            if out is None:
                out = self._empty_like()
            if reverse:
                tmp = self._empty_like(cls=NDArray)
                check_call(LIB.KVArrayFill(tmp._ref, float(other)))
                check_call(LIB.KVArrayBinary(op, tmp._ref, self._ref, out._ref))
            else:
                check_call(LIB.KVArrayBinaryScalar(op, self._ref, float(other), out._ref))
            return out
        arr = self._operand(other)
        if arr is None:
            return NotImplemented
        if out is None:
            out = self._empty_like()
        a, b = (arr, self) if reverse else (self, arr)
        check_call(LIB.KVArrayBinary(op, a._ref, b._ref, out._ref))
        return out

    def __add__(self, other):
        return self._binary(other, OP_ADD)

    def __radd__(self, other):
        return self._binary(other, OP_ADD, reverse=True)

    def __iadd__(self, other):
        return self._binary(other, OP_ADD, out=self)

    def __sub__(self, other):
        return self._binary(other, OP_SUB)

    def __rsub__(self, other):
        return self._binary(other, OP_SUB, reverse=True)

    def __isub__(self, other):
        return self._binary(other, OP_SUB, out=self)

    def __mul__(self, other):
        return self._binary(other, OP_MUL)

    def __rmul__(self, other):
        return self._binary(other, OP_MUL, reverse=True)

    def __imul__(self, other):
        return self._binary(other, OP_MUL, out=self)

    def __truediv__(self, other):
        return self._binary(other, OP_DIV)

    def __rtruediv__(self, other):
        return self._binary(other, OP_DIV, reverse=True)

    def __itruediv__(self, other):
        return self._binary(other, OP_DIV, out=self)

    def __neg__(self):
        return self._binary(0, OP_SUB, reverse=True)

    def __pos__(self):
        return self.copy()

    # -- display ----------------------------------------------------------------------------
    def __repr__(self):
        if self.closed:
            return "<%s (closed)>" % type(self).__name__
        shape, _, ctx = self._query_meta()
        return "\n%s\n<%s %s @%s>" % (str(self.asnumpy()), type(self).__name__,
                                      "x".join(str(d) for d in shape), ctx)

    __str__ = __repr__


def dtype_to_numpy(dtype):
    """numpy dtype of a supported dtype spelling (TypeError otherwise)."""
    return _CODE_TO_DTYPE[dtype_code(dtype)]


def _create(shape, ctx, dtype, cls):
    shape = _norm_shape(shape)
    ctx = current_context() if ctx is None else Context(ctx)
    code = dtype_code(dtype)
    dims = (c_int64 * max(len(shape), 1))(*shape)
    out = KVArrayHandle()
    check_call(LIB.KVArrayCreate(dims, len(shape), code, ctx.device_typeid, ctx.device_id,
                                 byref(out)))
    return cls(out)


def _from_numpy(src, ctx, cls):
    # Not ascontiguousarray: it returns at least one dimension, turning shape () into (1,).
    src = numpy.asarray(src, order="C")
    out = _create(src.shape, ctx, src.dtype, cls)
    if src.nbytes:
        check_call(LIB.KVArrayCopyFromHost(out._ref, src.ctypes.data_as(c_void_p), src.nbytes))
    return out


def _array(source, ctx, dtype, cls):
    if isinstance(source, NDArray):
        src = source.asnumpy()
    else:
        src = numpy.asarray(source)
    if dtype is None:
        dtype = src.dtype if (isinstance(source, (numpy.ndarray, NDArray))
                              and src.dtype in _DTYPE_TO_CODE) else _DEFAULT_DTYPE
    dtype = dtype_to_numpy(dtype)
    if src.dtype.kind not in "biuf":
        raise TypeError("cannot make an NDArray from data of dtype %s" % src.dtype)
    return _from_numpy(src.astype(dtype, copy=False), ctx, cls)


def empty(shape, ctx=None, dtype=None):
    """A new array (zero-filled: the library always initialises memory)."""
    return _create(shape, ctx, dtype, NDArray)


def zeros(shape, ctx=None, dtype=None, **kwargs):
    """A new array of zeros; ``shape`` an int or a tuple, ``ctx`` a Context (default
    cpu(0)), ``dtype`` float32 by default."""
    _no_kwargs("zeros", kwargs)
    return _create(shape, ctx, dtype, NDArray)


def ones(shape, ctx=None, dtype=None, **kwargs):
    """A new array of ones (see :func:`zeros`)."""
    _no_kwargs("ones", kwargs)
    return full(shape, 1, ctx, dtype)


def full(shape, val, ctx=None, dtype=None):
    """A new array with every element set to val."""
    out = _create(shape, ctx, dtype, NDArray)
    check_call(LIB.KVArrayFill(out._ref, float(val)))
    return out


def array(source_array, ctx=None, dtype=None):
    """A new array with a copy of source_array (a numpy array, nested lists, an NDArray).
    The dtype is the source's for numpy arrays of a supported dtype, else float32."""
    return _array(source_array, ctx, dtype, NDArray)


def _no_kwargs(fn, kwargs):
    if kwargs:
        raise TypeError("%s() got unexpected keyword arguments %s"
                        % (fn, ", ".join(sorted(kwargs))))
