"""The key-value store, as ``mx.kv``: ``kv.create('local')`` and the KVStore class.

Keys are ints (C int range) or strings; a store uses one kind, fixed by the first call that
names a key. Values and outputs follow the reference's list rules:

- ``kv.push(3, a)``: one key, one value;
- ``kv.push(3, [a0, a1])``: one key, several values (summed), e.g. one per device;
- ``kv.push([3, 5], [a, b])``: a list of keys with one value each;
- ``kv.push([3, 5], [[a0, a1], [b0, b1]])``: a list of keys with several values each.

``pull``'s ``out`` follows the same rules (each listed output receives the stored value).
Values may also be numpy arrays (copied in); outputs may be numpy arrays (written after a
successful pull).

Closing while a call runs: a store counts the calls that are using its handle. ``close()``
while any is running (on another thread, or from inside the store's own updater or
controller) raises :class:`~kvstore.errors.BusyError` and leaves the store open and usable;
arrays passed to a running call stay alive until it returns (see ``ndarray._Handle``).
"""
import array
import atexit
import numbers
import os
import struct
import threading
import weakref
from ctypes import byref, c_char_p, c_int

import numpy

from . import _callback
from ._lib import (LIB, UNCHECKED, KVArrayHandle, KVController, KVFreeFn, KVStoreHandle,
                   KVStrUpdater, KVUpdater)
from .context import cpu
from .errors import KVStoreError, check_call, error_class, make_error
from .ndarray import (NDArray, _DTYPE_TO_CODE, _PACKED, _forget_packed, _from_numpy,
                       _remember_packed)
from .optimizer import Optimizer

__all__ = ["KVStore", "KVStoreBase", "create", "waitall", "is_worker_node", "is_server_node",
           "is_scheduler_node"]

_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1

# Stores still open; closed at interpreter exit while the whole package is still intact (so
# free hooks and updaters never run into a half-torn-down module).
_live_stores = weakref.WeakSet()


@atexit.register
def _close_live_stores():
    for store in list(_live_stores):
        try:
            store.close()
        except Exception:
            pass


def _c_path(fname):
    """A file name (str, bytes or path-like) as the library takes it: the file system's
    encoding, as open() would use."""
    path = os.fsencode(fname)
    if b"\0" in path:
        raise ValueError("file name %r contains a NUL character" % (fname,))
    return path


def _c_string(text, what):
    """text as UTF-8 for the library; a NUL would silently cut the C string short."""
    if "\0" in text:
        raise ValueError("%s %r contains a NUL character" % (what, text))
    return text.encode("utf-8")


def _where(where):
    """The context of an error message: where is a str, or (what, key) or (what, key, index)
    as the flattening passes it, formatted only when an error is raised."""
    if isinstance(where, str):
        return where
    text = "%s (key %r)" % where[:2]
    return text if len(where) == 2 else "%s[%d]" % (text, where[2])


def _key_kind(key, where):
    # Exact int and str first: isinstance against the numbers.Integral ABC is slow.
    t = type(key)
    if t is int or (t is not str and t is not bool and isinstance(key, numbers.Integral)):
        if not _INT_MIN <= int(key) <= _INT_MAX:
            raise OverflowError("%s: int key %d is out of the C int range" % (_where(where), key))
        return "int"
    if t is str or isinstance(key, str):
        return "str"
    raise TypeError("%s: a key must be an int or a str, not %s (%r)"
                    % (_where(where), type(key).__name__, key))


class _Batch(object):
    """Flattened parallel keys/arrays of one call, in C form."""

    def __init__(self, keys, arrays, kind, writeback=()):
        self.keys = keys
        self.arrays = arrays
        # The arrays' _Handles, held until the batch goes away (after the call returns): an
        # array closed meanwhile on another thread is then freed after the call, not under it.
        self.refs = [a._ref for a in arrays]
        self.kind = kind
        self.writeback = writeback  # (numpy out, temporary NDArray) pairs for outputs
        n = len(keys)
        self.num = n
        if kind == "str":
            self.c_keys = (c_char_p * max(n, 1))(*[_c_string(k, "string key") for k in keys])
        else:
            self.c_keys = (c_int * max(n, 1))(*[int(k) for k in keys])
        self.c_arrays = (KVArrayHandle * max(n, 1))(*[r.ptr for r in self.refs])

    def finish(self):
        for dst, tmp in self.writeback:
            numpy.copyto(dst, tmp.asnumpy(), casting="no")


def _as_input(v, where):
    if isinstance(v, NDArray):
        return v
    if isinstance(v, numpy.ndarray):
        if v.dtype not in _DTYPE_TO_CODE:
            raise TypeError("%s: numpy dtype %s is not supported" % (_where(where), v.dtype))
        return _from_numpy(v, cpu(0), NDArray)
    raise TypeError("%s: values must be NDArrays (or numpy arrays), not %s"
                    % (_where(where), type(v).__name__))


def _as_output(v, where, writeback):
    if isinstance(v, NDArray):
        return v
    if isinstance(v, numpy.ndarray):
        if v.dtype not in _DTYPE_TO_CODE:
            raise TypeError("%s: numpy dtype %s is not supported" % (_where(where), v.dtype))
        if not v.flags.writeable:
            raise ValueError("%s: the numpy output array is read-only" % _where(where))
        tmp = _from_numpy(v, cpu(0), NDArray)
        writeback.append((v, tmp))
        return tmp
    raise TypeError("%s: outputs must be NDArrays (or numpy arrays), not %s"
                    % (_where(where), type(v).__name__))


def _flatten(key, values, what, output=False):
    """Keys and arrays of a call, flattened like the reference's _ctype_key_value. The
    general path: the common shapes take _fast_keys/_fast_arrays first."""
    if values is None:
        raise TypeError("%s: %s is required" % (what, "out" if output else "value"))
    writeback = []
    keys, arrays, kinds = [], [], []

    def one(k, vals):
        kind = _key_kind(k, (what, k))
        if isinstance(vals, (list, tuple)):
            if not vals:
                raise ValueError("%s: empty list of arrays for key %r" % (_where((what, k)), k))
            for i, v in enumerate(vals):
                if isinstance(v, (list, tuple)):
                    raise TypeError("%s: key %r has a nested list of arrays; for several keys "
                                    "pass a list of keys" % (_where((what, k)), k))
                keys.append(k)
                kinds.append(kind)
                arrays.append(_as_output(v, (what, k, i), writeback) if output
                              else _as_input(v, (what, k, i)))
        else:
            keys.append(k)
            kinds.append(kind)
            arrays.append(_as_output(vals, (what, k), writeback) if output
                          else _as_input(vals, (what, k)))

    if isinstance(key, (list, tuple)):
        if not isinstance(values, (list, tuple)):
            raise TypeError("%s: a list of %d keys needs a list of %d %s, got %s"
                            % (what, len(key), len(key), "outputs" if output else "values",
                               type(values).__name__))
        if len(key) != len(values):
            raise ValueError("%s: %d keys but %d %s" % (what, len(key), len(values),
                                                       "outputs" if output else "values"))
        for k, v in zip(key, values):
            one(k, v)
    else:
        one(key, values)
    kind = kinds[0] if kinds else "int"
    for k, kk in zip(keys, kinds):
        if kk != kind:
            raise error_class("KEY_KIND_MISMATCH")(
                "%s: int and string keys mixed in one call (key %r after key %r)"
                % (what, k, keys[0]), -5)
    return _Batch(keys, arrays, kind, writeback)


# -- hot paths ------------------------------------------------------------------------------
# push, pull and pushpull of the common shapes (one int or str key and one NDArray; a list of
# int keys, or of str keys, and a list of as many NDArrays) skip _flatten and _Batch: int keys
# are packed into bytes by the struct/array modules (which also check the C int range), str
# keys are the joined pointers of cached UTF-8 copies (_str_key_ptr), the arrays' handles are
# the joined _Handle.cptr bytes, and the call goes to _lib.UNCHECKED (no argtypes). Any other
# shape, and any argument these checks do not accept, takes the general path, which then
# accepts it or raises its usual error: the fast paths change no behaviour, only cost.
_PUSH = UNCHECKED["KVStorePush"]
_PULL = UNCHECKED["KVStorePull"]
_PUSHPULL = UNCHECKED["KVStorePushPull"]
_PUSH_STR = UNCHECKED["KVStorePushStr"]
_PULL_STR = UNCHECKED["KVStorePullStr"]
_PUSHPULL_STR = UNCHECKED["KVStorePushPullStr"]
_pack_int = struct.Struct("=i").pack
_INT_ONLY = {int}
_STR_ONLY = {str}

# A tuple of int keys (exact ints, as _fast_keys checks before it looks) -> the keys packed
# as C ints; a repeated key list is packed once. At most _INT_KEYS_MAX lists holding at most
# _INT_KEYS_LEN keys in all (_INT_KEYS_HELD[0]); the table is cleared when a new list would
# not fit.
_INT_KEYS = {}
_INT_KEYS_MAX = 64
_INT_KEYS_LEN = 1 << 20
_INT_KEYS_HELD = [0]

# str key -> (the native bytes of a char* to its UTF-8 copy, the c_char_p owning the copy).
# Entries are never removed, so a pointer taken from here stays valid for any call; past
# _STR_KEYS_MAX distinct keys, new ones take the general path.
_STR_KEYS = {}
_STR_KEYS_MAX = 1 << 16


def _str_key_ptr(key):
    """The cached char* bytes of a str key, or None (a NUL inside, not encodable, or the
    cache is full): the general path then handles the key, and raises for a bad one."""
    e = _STR_KEYS.get(key)
    if e is None:
        if len(_STR_KEYS) >= _STR_KEYS_MAX or "\0" in key:
            return None
        try:
            owner = c_char_p(key.encode("utf-8"))
        except UnicodeError:
            return None
        e = _STR_KEYS.setdefault(key, (bytes(owner), owner))
    return e[0]


def _fast_keys(key):
    """(num, packed keys, str keys?) for one int or str key or a non-empty list/tuple of
    ints or of strs, else None."""
    t = type(key)
    if t is int:
        try:
            return 1, _pack_int(key), False
        except struct.error:  # out of the C int range
            return None
    if t is str:
        p = _str_key_ptr(key)
        return None if p is None else (1, p, True)
    if (t is list or t is tuple) and key:
        kinds = set(map(type, key))
        if kinds == _INT_ONLY:
            n = len(key)
            if n <= _INT_KEYS_LEN:
                tk = tuple(key)
                p = _INT_KEYS.get(tk)
                if p is not None:
                    return n, p, False
            try:
                p = array.array("i", key).tobytes()
            except OverflowError:
                return None
            if n <= _INT_KEYS_LEN:
                if len(_INT_KEYS) >= _INT_KEYS_MAX or _INT_KEYS_HELD[0] + n > _INT_KEYS_LEN:
                    _INT_KEYS.clear()
                    _INT_KEYS_HELD[0] = 0
                _INT_KEYS[tk] = p
                _INT_KEYS_HELD[0] += n
            return n, p, False
        if kinds == _STR_ONLY:
            try:
                return len(key), b"".join(map(_str_key_ptr, key)), True
            except TypeError:  # a None: a key for the general path
                return None
    return None


def _fast_arrays(values, num, one_key):
    """(handles, packed handles) for one NDArray (with one_key, an int or str key rather
    than a list) or a list/tuple of num NDArrays, else None. The _Handles are returned so
    that the caller holds them until the call returns."""
    if one_key and isinstance(values, NDArray):
        h = values._h
        if h is None or h.cptr is None:
            return None
        return h, h.cptr
    t = type(values)
    if (t is list or t is tuple) and len(values) == num:
        tv = tuple(values)
        try:
            e = _PACKED.get(tv)  # the same NDArrays as a recorded list (ndarray._PACKED)
        except TypeError:  # an unhashable value: not an NDArray
            return None
        if e is not None:
            return e
        # Comprehensions, not map(attrgetter): CPython 3.11 specialises their slot loads.
        try:
            hs = [v._h for v in tv]
            packed = b"".join([h.cptr for h in hs])
        except (AttributeError, TypeError):  # not an NDArray, a nested list, a closed array
            return None
        _remember_packed(tv, hs, packed)
        return hs, packed
    return None


class KVStore(object):
    """A store created by :func:`create`. Release it with :meth:`close` (or ``with``); it is
    also released when garbage-collected and at interpreter exit."""

    def __init__(self, handle):
        if not isinstance(handle, KVStoreHandle) or not handle:
            raise TypeError("KVStore() takes a non-NULL KVStoreHandle; use kvstore.kv.create")
        self._handle = handle
        # One entry per call using _handle right now; close() refuses while there is one.
        # list.append and list.pop are atomic under the GIL, so a call counts itself without
        # taking _lock: it appends, then reads _handle. close(), under _lock, clears _handle
        # first, then looks at _active, and puts the handle back if a call is counted. A
        # call that read None takes _lock once (a close() in progress has then either put
        # the handle back or really closed) and reads again (_recheck).
        self._active = []
        self._lock = threading.Lock()
        # Class of the arrays handed to updaters: the class of the arrays last used to
        # initialise keys (kvstore.np arrays for np-flavoured code).
        self._array_box = [NDArray]
        # The Python updaters (UpdaterCells) by key kind; registrations refer to them weakly.
        self._updaters = {}
        # Arrays that pulls of a distributed store may still be writing (their writes finish
        # after the call returns), for waitall(); None for in-process stores, whose writes
        # are done when a call returns. Under _lock.
        out = c_char_p()
        check_call(LIB.KVStoreGetType(handle, byref(out)))
        self._pending_outputs = (weakref.WeakSet() if out.value.startswith(b"dist") else None)
        _live_stores.add(self)

    # -- lifetime ---------------------------------------------------------------------------
    @property
    def handle(self):
        """The KVStoreHandle; ValueError once closed. Calls made with it directly are not
        counted in use: their caller must not close() the store until they return."""
        h = self._handle
        if h is None:
            raise ValueError("operation on a closed KVStore")
        return h

    @property
    def closed(self):
        return self._handle is None

    def _enter(self):
        """The handle, counted in use until the matching _leave()."""
        self._active.append(None)
        h = self._handle
        if h is None:
            try:
                h = self._recheck()
            except BaseException:
                self._active.pop()
                raise
        return h

    def _recheck(self):
        """The handle, for a counted call that read None: see _active."""
        with self._lock:
            h = self._handle
        if h is None:
            raise ValueError("operation on a closed KVStore")
        return h

    def _leave(self):
        self._active.pop()

    def _call(self, cfn, *args, callbacks=False, server=False):
        """cfn(handle, *args) with the handle counted in use for the whole call. With
        callbacks=True, an exception raised by a Python callback during the call is
        re-raised (see _callback.call)."""
        h = self._enter()
        try:
            if callbacks:
                _callback.call(cfn, h, *args, server=server)
            else:
                check_call(cfn(h, *args))
        finally:
            self._leave()

    def close(self):
        """Releases the store, its values and its updater registrations (whose free hooks
        drop the Python callables). Idempotent. Raises the error of a distributed worker's
        exit barrier, after releasing the store anyway.

        While another call on the store is running (on another thread, or the push whose
        updater calls close()), raises BusyError and leaves the store open and usable."""
        with self._lock:
            h = self._handle
            if h is None:
                return
            self._handle = None
            running = len(self._active)
            if running:
                self._handle = h
                busy = error_class("BUSY")
                raise busy("close: %d call(s) on this store have not returned yet (on another "
                           "thread, or the call running this updater or controller); the "
                           "store stays open" % running, busy.code)
        _live_stores.discard(self)
        rc = LIB.KVStoreFree(h)
        if rc != 0 and error_class(rc).name == "KV_ERR_BUSY":
            # A call the count cannot see (made through .handle directly): nothing was freed.
            err = make_error(rc)
            with self._lock:
                self._handle = h
            _live_stores.add(self)
            raise err
        self._updaters.clear()
        _forget_packed()  # the recorded lists' arrays are no longer held for this store
        check_call(rc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- properties -------------------------------------------------------------------------
    @property
    def type(self):
        """The type name given to create(), lowercased."""
        out = c_char_p()
        h = self._enter()
        try:
            # The string belongs to the store: read it before the store can be closed.
            check_call(LIB.KVStoreGetType(h, byref(out)))
            return out.value.decode("utf-8")
        finally:
            self._leave()

    @property
    def rank(self):
        """Rank of this worker (0 for in-process stores)."""
        out = c_int(0)
        self._call(LIB.KVStoreGetRank, byref(out))
        return out.value

    @property
    def num_workers(self):
        """Number of workers (1 for in-process stores)."""
        out = c_int(0)
        self._call(LIB.KVStoreGetGroupSize, byref(out))
        return out.value

    def __repr__(self):
        if self.closed:
            return "<KVStore (closed)>"
        return "<KVStore type=%r rank=%d num_workers=%d>" % (self.type, self.rank,
                                                              self.num_workers)

    # -- data -------------------------------------------------------------------------------
    def _note_array_class(self, batch):
        from .sparse import RowSparseNDArray
        for a in batch.arrays:
            if isinstance(a, NDArray) and not isinstance(a, RowSparseNDArray):
                self._array_box[0] = type(a)
                break

    def init(self, key, value):
        """Initialises key(s) with copies of value(s). The updater does not run."""
        b = _flatten(key, value, "init")
        fn = LIB.KVStoreInitStr if b.kind == "str" else LIB.KVStoreInit
        self._call(fn, b.num, b.c_keys, b.c_arrays)
        self._note_array_class(b)

    def _hot(self, cfn, args, refs, callbacks):
        """cfn(handle, *args) for the hot paths, counted in use as _call does. refs (the
        arrays' _Handles) only need to stay referenced until the call returns. With
        callbacks, a Python updater of this store may run (see _call); without one
        registered, nothing can raise in a callback and the call is made directly."""
        h = self._enter()
        try:
            if callbacks and self._updaters:
                _callback.call(cfn, h, *args)
            else:
                rc = cfn(h, *args)
                if rc != 0:
                    raise make_error(rc)
        finally:
            self._active.pop()

    def push(self, key, value, priority=0):
        """Pushes value(s); the values of one key are summed and merged by the updater.
        An exception raised by a Python updater propagates from here, and the stored
        value is then unchanged."""
        # One int key, one NDArray, no Python updater: _hot inlined (see "hot paths").
        if (type(key) is int and type(priority) is int and isinstance(value, NDArray)
                and not self._updaters and _INT_MIN <= key <= _INT_MAX):
            ref = value._h  # held until the call returns (see ndarray._Handle)
            if ref is not None and ref.cptr is not None:
                active = self._active
                active.append(None)
                try:
                    h = self._handle
                    rc = _PUSH(h if h is not None else self._recheck(), 1, _pack_int(key),
                               ref.cptr, priority)
                finally:
                    active.pop()
                if rc != 0:
                    raise make_error(rc)
                return
        fk = _fast_keys(key)
        if fk is not None:
            fa = _fast_arrays(value, fk[0], type(key) in (int, str))
            if fa is not None:
                if type(priority) is not int:
                    priority = int(priority)
                self._hot(_PUSH_STR if fk[2] else _PUSH, (fk[0], fk[1], fa[1], priority),
                          fa[0], True)
                return
        b = _flatten(key, value, "push")
        fn = LIB.KVStorePushStr if b.kind == "str" else LIB.KVStorePush
        self._call(fn, b.num, b.c_keys, b.c_arrays, int(priority), callbacks=True)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copies the stored value of key(s) into every output in out."""
        # One int key, one NDArray: _hot inlined (see "hot paths").
        if (type(key) is int and type(priority) is int and isinstance(out, NDArray)
                and _INT_MIN <= key <= _INT_MAX):
            ref = out._h  # held until the call returns (see ndarray._Handle)
            if ref is not None and ref.cptr is not None:
                active = self._active
                active.append(None)
                try:
                    h = self._handle
                    rc = _PULL(h if h is not None else self._recheck(), 1, _pack_int(key),
                               ref.cptr, priority)
                finally:
                    active.pop()
                if rc != 0:
                    raise make_error(rc)
                if self._pending_outputs is not None:
                    self._note_pending((out,))
                return
        fk = _fast_keys(key)
        if fk is not None:
            fa = _fast_arrays(out, fk[0], type(key) in (int, str))
            if fa is not None:
                if type(priority) is not int:
                    priority = int(priority)
                self._hot(_PULL_STR if fk[2] else _PULL, (fk[0], fk[1], fa[1], priority),
                          fa[0], False)
                if self._pending_outputs is not None:
                    self._note_pending(out if type(out) in (list, tuple) else (out,))
                return
        b = _flatten(key, out, "pull", output=True)
        fn = LIB.KVStorePullStr if b.kind == "str" else LIB.KVStorePull
        self._call(fn, b.num, b.c_keys, b.c_arrays, int(priority))
        self._note_pending_outputs(b)
        b.finish()

    def pushpull(self, key, value, out=None, priority=0):
        """Push then pull in one call. Without out, the result is written into value."""
        fk = _fast_keys(key)
        if fk is not None:
            one_key = type(key) in (int, str)
            fv = _fast_arrays(value, fk[0], one_key)
            fo = fv if out is None else _fast_arrays(out, fk[0], one_key)
            if fv is not None and fo is not None:
                if type(priority) is not int:
                    priority = int(priority)
                self._hot(_PUSHPULL_STR if fk[2] else _PUSHPULL,
                          (fk[0], fk[1], fv[1], fk[0], fk[1], fo[1], priority), (fv[0], fo[0]),
                          True)
                if self._pending_outputs is not None:
                    o = value if out is None else out
                    self._note_pending(o if type(o) in (list, tuple) else (o,))
                return
        v = _flatten(key, value, "pushpull")
        o = _flatten(key, value if out is None else out, "pushpull", output=True)
        fn = LIB.KVStorePushPullStr if v.kind == "str" else LIB.KVStorePushPull
        self._call(fn, v.num, v.c_keys, v.c_arrays, o.num, o.c_keys, o.c_arrays, int(priority),
                   callbacks=True)
        self._note_pending_outputs(o)
        o.finish()

    def broadcast(self, key, value, out, priority=0):
        """Initialises key(s) with value(s), then pulls into out."""
        v = _flatten(key, value, "broadcast")
        o = _flatten(key, out, "broadcast", output=True)
        fn = LIB.KVStoreBroadcastStr if v.kind == "str" else LIB.KVStoreBroadcast
        self._call(fn, v.num, v.c_keys, v.c_arrays, o.num, o.c_keys, o.c_arrays, int(priority))
        self._note_array_class(v)
        self._note_pending_outputs(o)
        o.finish()

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Pulls rows of key(s) into row-sparse output(s), as the reference's
        ``row_sparse_pull``: each output (a RowSparseNDArray of the key's shape and dtype)
        then holds exactly the rows named by its row_ids (a dense NDArray or numpy array of
        integral values, any order, repeats allowed), replacing what it held. ``out`` and
        ``row_ids`` have the shapes of ``pull``'s ``out``: one per key, or a list per key
        for several outputs; one row_ids (or a list of one) serves every output."""
        if row_ids is None:
            raise TypeError("row_sparse_pull: row_ids is required")
        o = _flatten(key, out, "row_sparse_pull", output=True)
        if isinstance(row_ids, (list, tuple)) and len(row_ids) == 1 and (
                not isinstance(key, (list, tuple)) or len(key) == 1):
            row_ids = row_ids[0]
        if isinstance(row_ids, (list, tuple)):
            r = _flatten(key, row_ids, "row_sparse_pull row_ids")
            if r.num != o.num:
                raise ValueError("row_sparse_pull: %d outputs but %d row_ids" % (o.num, r.num))
        else:
            rid = _as_input(row_ids, "row_sparse_pull row_ids")
            r = _Batch(o.keys, [rid] * o.num, o.kind)
        fn = LIB.KVStoreRowSparsePullStr if o.kind == "str" else LIB.KVStoreRowSparsePull
        self._call(fn, o.num, o.c_keys, o.c_arrays, r.c_arrays, int(priority))
        self._note_pending_outputs(o)

    # -- updaters ---------------------------------------------------------------------------
    def _register(self, setter, ctype, fn, str_keys):
        slot = "str" if str_keys else "int"
        if fn is None:
            self._call(setter, ctype(), None, KVFreeFn())
            self._updaters.pop(slot, None)
            return None
        cell = _callback.UpdaterCell(fn)
        reg = _callback.make_updater(cell, self._array_box, str_keys)
        reg.publish()
        try:
            self._call(setter, reg.cfunc, reg.user_data, _callback.FREE_HOOK)
        except BaseException:
            # Refused: the library did not take ownership and never calls the free hook, so
            # this is the one release of the registration.
            reg.withdraw()
            raise
        self._updaters[slot] = cell  # the store owns the Python callable
        return reg

    def _set_updater(self, updater):
        """Sets the updater ``updater(key, input, stored)``: it must merge ``input`` (the
        sum of a push) into ``stored`` in place, e.g. ``stored += input * 2``. It is used
        for int keys and, with the key as a str, for string keys. ``input`` and ``stored``
        are valid only during the call. None restores the default (assign)."""
        if updater is not None and not callable(updater):
            raise TypeError("updater must be callable as updater(key, input, stored), not %s"
                            % type(updater).__name__)
        self._register(LIB.KVStoreSetUpdater, KVUpdater, updater, False)
        self._register(LIB.KVStoreSetStrUpdater, KVStrUpdater, updater, True)

    set_updater = _set_updater

    def _set_str_updater(self, updater):
        """Sets only the string-key updater (KVStoreSetStrUpdater)."""
        if updater is not None and not callable(updater):
            raise TypeError("updater must be callable, not %s" % type(updater).__name__)
        self._register(LIB.KVStoreSetStrUpdater, KVStrUpdater, updater, True)

    def set_optimizer(self, optimizer):
        """Installs a built-in optimizer: an object of :mod:`kvstore.optimizer`
        (``optimizer.SGD(learning_rate=0.1, momentum=0.9)``) or a spec string such as
        ``"sgd(learning_rate=0.1,momentum=0.9)"``."""
        if isinstance(optimizer, Optimizer):
            optimizer = optimizer.spec
        if not isinstance(optimizer, str):
            raise TypeError("set_optimizer takes a kvstore.optimizer object such as "
                            "optimizer.SGD(learning_rate=0.1) or a spec string such as "
                            "'sgd(learning_rate=0.1)', not %s" % type(optimizer).__name__)
        self._call(LIB.KVStoreSetOptimizer, _c_string(optimizer, "optimizer spec"))

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Writes the state of the store's built-in optimizer to the file ``fname`` (a str
        or path-like), atomically, in the format of docs/OPTIMIZER-STATES.md.
        ``dump_optimizer`` is accepted for compatibility with MXNet and ignored: the file
        always records the optimizer's spec. Raises NotSupportedError when the store has no
        built-in optimizer (see set_optimizer) or keeps its state elsewhere."""
        del dump_optimizer  # the spec is always in the file
        self._call(LIB.KVStoreSaveOptimizerStates, _c_path(fname))

    def load_optimizer_states(self, fname):
        """Replaces the state of the store's built-in optimizer with the state saved in
        ``fname`` by save_optimizer_states; training then continues exactly as it would have
        from the save. Everything is checked first: a corrupt or truncated file, another
        optimizer, a key the store lacks or a key whose shape or dtype differs raises (an
        InvalidArgumentError, UnknownKeyError, ShapeMismatchError, ...) and changes nothing."""
        self._call(LIB.KVStoreLoadOptimizerStates, _c_path(fname))

    def set_gradient_compression(self, compression_params):
        """Compresses later pushes, as MXNet's set_gradient_compression:
        ``{'type': '2bit', 'threshold': 0.5}`` (or ``'1bit'``; threshold defaults to 0.5),
        with the reference's quantisation and a residual per key (error feedback);
        ``{'type': 'none'}`` turns compression off again (the residuals are dropped).
        float32 and float16 pushes are compressed, other dtypes go uncompressed; init never
        is. ``'pull': 1`` (2bit, dist_* stores) also compresses pulls: each pull sends the
        change since what this worker last received (the header's
        KVStoreSetGradientCompression has the rules). The device and dist_* stores
        compress; the others raise NotSupportedError (MXNet ignores the setting on local
        stores). Unknown keys, types or a bad threshold raise InvalidArgumentError and
        change nothing."""
        if not isinstance(compression_params, dict):
            raise TypeError("set_gradient_compression takes a dict such as {'type': '2bit', "
                            "'threshold': 0.5}, not %s" % type(compression_params).__name__)
        keys, vals = [], []
        for k, v in compression_params.items():
            if not isinstance(k, str):
                raise TypeError("gradient compression parameter names are str, not %s"
                                % type(k).__name__)
            keys.append(_c_string(k, "gradient compression parameter"))
            if isinstance(v, numbers.Real) and not isinstance(v, bool):
                v = repr(float(v))  # shortest round trip; the library reads a float32
            vals.append(_c_string(str(v), "gradient compression value"))
        n = len(keys)
        self._call(LIB.KVStoreSetGradientCompression, n, (c_char_p * n)(*keys),
                   (c_char_p * n)(*vals))

    # -- capabilities -----------------------------------------------------------------------
    #: The capability of running built-in optimizers (the reference's KVStoreBase.OPTIMIZER).
    OPTIMIZER = "optimizer"

    def is_capable(self, capability):
        """Whether the store has ``capability`` (case-insensitive): :attr:`OPTIMIZER`
        (``"optimizer"``) is True for every store type (in-process stores run the optimizer
        themselves, a distributed worker's run on the servers). An unknown name raises
        InvalidArgumentError, a ValueError as in the reference, naming the known ones."""
        if not isinstance(capability, str):
            raise TypeError("capability must be a str such as KVStore.OPTIMIZER, not %s"
                            % type(capability).__name__)
        out = c_int(0)
        self._call(LIB.KVStoreIsCapable, _c_string(capability, "capability"), byref(out))
        return bool(out.value)

    # -- synchronisation, distributed -------------------------------------------------------
    def _barrier(self):
        """Waits until every worker has reached the barrier."""
        self._call(LIB.KVStoreBarrier)

    barrier = _barrier

    def wait_all(self):
        """Blocks until every pending asynchronous operation of the store has completed."""
        self._call(LIB.KVStoreWaitAll)

    # -- waitall: every asynchronous write of this store -------------------------------------
    def _note_pending_outputs(self, batch):
        if self._pending_outputs is not None:
            self._note_pending(batch.arrays)

    def _note_pending(self, arrays):
        with self._lock:
            self._pending_outputs.update(arrays)

    def _wait_everything(self):
        """For :func:`waitall`: KVStoreWaitAll, then KVArrayWaitToRead on every array a pull
        of this store wrote since the last call and that is still open. Waits for all of
        them, then raises the first error (a failed push, then a failed pull). Nothing to do
        for a closed store (closing waited)."""
        with self._lock:
            h = self._handle
            if h is None:
                return
            self._active.append(None)
            outputs = list(self._pending_outputs or ())
            if self._pending_outputs is not None:
                self._pending_outputs.clear()
        first = None
        try:
            rc = LIB.KVStoreWaitAll(h)
            if rc != 0:
                first = make_error(rc)
        finally:
            self._leave()
        for a in outputs:
            try:
                a.wait_to_read()
            except KVStoreError as exc:
                first = first or exc
            except ValueError:
                pass  # closed meanwhile: nobody can read it any more
        if first is not None:
            raise first

    def num_dead_node(self, node_id, timeout_sec=60):
        """Number of nodes in the groups node_id (1 scheduler, 2 servers, 4 workers, summed)
        whose last heartbeat is older than timeout_sec."""
        out = c_int(0)
        self._call(LIB.KVStoreGetNumDeadNode, int(node_id), int(timeout_sec), byref(out))
        return out.value

    def _set_barrier_before_exit(self, barrier_before_exit=True):
        self._call(LIB.KVStoreSetBarrierBeforeExit, 1 if barrier_before_exit else 0)

    def _send_command_to_servers(self, head, body):
        self._call(LIB.KVStoreSendCommandToServers, int(head),
                   _c_string(str(body), "command body"))

    def run_server(self, controller=None):
        """Runs this process as the server or scheduler named by DMLC_ROLE until the job
        ends; controller(head, body) receives commands sent by workers (heads >= 0). The
        updater and the controller run on this thread; an exception they raise fails the
        worker's call with CallbackError and is printed here."""
        reg = _callback.make_controller(controller) if controller is not None else None
        cfunc = reg.cfunc if reg is not None else KVController()
        self._call(LIB.KVStoreRunServer, cfunc, None, callbacks=True, server=True)
        del reg


#: The reference's abstract base of stores (``mx.kv.KVStoreBase``); here the one store class,
#: so ``KVStoreBase.OPTIMIZER`` and ``isinstance(store, KVStoreBase)`` work unchanged.
KVStoreBase = KVStore


def waitall():
    """Blocks until every asynchronous operation of this process's open stores has finished
    (``mx.nd.waitall``): ``KVStoreWaitAll`` on each store, then a wait on every array a
    distributed pull wrote (``wait_to_read``). In-process stores finish every call before it
    returns, so for them this returns at once. Waits for everything first, then raises the
    first failure: a failed push (as ``wait_all`` reports it), else a failed pull. Arrays
    and stores closed meanwhile are skipped."""
    while True:
        try:
            stores = list(_live_stores)
            break
        except RuntimeError:  # the set changed size: a store was opened on another thread
            continue
    first = None
    for store in stores:
        try:
            store._wait_everything()
        except KVStoreError as exc:
            first = first or exc
    if first is not None:
        raise first


def create(name="local"):
    """Creates a store: 'local', 'device', 'nccl', 'dist_sync', 'dist_async', ... (the
    name is case-insensitive; an unknown name raises InvalidArgumentError listing the valid
    ones)."""
    if not isinstance(name, str):
        raise TypeError("name must be a str, not %s" % type(name).__name__)
    out = KVStoreHandle()
    check_call(LIB.KVStoreCreate(_c_string(name, "store type"), byref(out)))
    return KVStore(out)


def is_worker_node():
    return bool(LIB.KVIsWorkerNode())


def is_server_node():
    return bool(LIB.KVIsServerNode())


def is_scheduler_node():
    return bool(LIB.KVIsSchedulerNode())
