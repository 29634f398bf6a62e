"""Python callables behind the library's C callbacks.

ctypes swallows exceptions raised inside a callback (it prints them and returns 0), so every
trampoline here catches the exception, remembers it for the calling thread and returns
non-zero; the library then fails the call with KV_ERR_CALLBACK (leaving the stored value as
it was) and :func:`call` re-raises the remembered exception in the caller.

Lifetime: a registration (the CFUNCTYPE trampoline) is kept in ``_registry`` under an
integer token, which is the ``user_data`` the library holds. The library calls the single
free hook exactly once when the registration is replaced, cleared or the store is freed; the
hook removes the entry, which drops the last reference to the trampoline. Nothing else keeps
it alive, so a leak in that protocol is observable (``live_registrations()``).

The Python updater itself is held by its store (an :class:`UpdaterCell` in the KVStore),
and the trampoline reaches it through a weak reference. An updater that refers to its own
store therefore forms an ordinary reference cycle that the garbage collector can reclaim
(the store's finaliser frees the library store, whose free hooks then drop the
trampolines), instead of being pinned forever by the module-level registry.
"""
import ctypes
import itertools
import sys
import threading
import traceback
import weakref

from ._lib import KVController, KVFreeFn, KVStrUpdater, KVUpdater
from .errors import make_error

__all__ = ["Registration", "UpdaterCell", "make_updater", "make_controller", "FREE_HOOK", "call", "live_registrations",
           "free_hook_calls"]

_registry = {}
_tokens = itertools.count(1)
# Reentrant: a free hook can run on this thread while it holds the lock, when an allocation
# under the lock triggers garbage collection that releases an unreachable store.
_lock = threading.RLock()
_pending = threading.local()
_stats = {"free_hook_calls": 0}


class UpdaterCell(object):
    """Holds a Python updater for its store; registrations refer to it weakly."""

    __slots__ = ("fn", "__weakref__")

    def __init__(self, fn):
        self.fn = fn


class Registration(object):
    """One callable registered with the library (int or string updater, or controller)."""

    __slots__ = ("token", "cfunc", "kind", "_fn", "_cell_ref", "__weakref__")

    def __init__(self, kind, fn=None, cell=None):
        self.kind = kind
        self._fn = fn
        self._cell_ref = weakref.ref(cell) if cell is not None else None
        self.cfunc = None
        with _lock:
            self.token = next(_tokens)

    @property
    def fn(self):
        """The Python callable (None once its store has dropped it)."""
        if self._cell_ref is None:
            return self._fn
        cell = self._cell_ref()
        return cell.fn if cell is not None else None

    @property
    def user_data(self):
        return ctypes.c_void_p(self.token)

    def publish(self):
        """Puts the registration in the registry (just before handing it to the library)."""
        with _lock:
            _registry[self.token] = self

    def withdraw(self):
        """Removes it again (the library refused the registration, so no free hook runs)."""
        with _lock:
            _registry.pop(self.token, None)


def _free_hook(user_data):
    try:
        with _lock:
            _registry.pop(user_data, None)
            _stats["free_hook_calls"] += 1
    except BaseException:  # never let anything escape into the library
        pass


#: The KVFreeFn passed with every registration. It lives as long as the process: an extra
#: reference is taken so that module teardown at exit can never free it while a store that
#: is still being released might call it.
FREE_HOOK = KVFreeFn(_free_hook)
ctypes.pythonapi.Py_IncRef(ctypes.py_object(FREE_HOOK))


def _remember(exc):
    if getattr(_pending, "in_server", False):
        # On a server no caller can receive it (the worker gets KV_ERR_CALLBACK): report it.
        sys.stderr.write("kvstore: exception in a callback on the server (the sending worker "
                         "gets a callback error):\n")
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    if getattr(_pending, "exc", None) is None:
        _pending.exc = exc


def make_updater(cell, array_box, str_keys):
    """A Registration whose trampoline calls cell.fn(key, recv, stored) with NDArrays of
    class array_box[0] that borrow the library's handles for the duration of the call."""
    reg = Registration("str_updater" if str_keys else "updater", cell=cell)
    cell_ref = reg._cell_ref

    def trampoline(key, recv, stored, _user_data):
        try:
            live = cell_ref()
            if live is None:
                raise RuntimeError("the updater was replaced, or its store released, while "
                                   "a push was about to run it")
            if str_keys:
                key = key.decode("utf-8") if key is not None else None
            cls = array_box[0]
            a = cls._borrow(recv)
            b = cls._borrow(stored)
            try:
                live.fn(key, a, b)
            finally:
                a._invalidate_borrowed()
                b._invalidate_borrowed()
            return 0
        except BaseException as exc:  # ctypes would swallow it: hand it to the caller
            _remember(exc)
            return -1

    reg.cfunc = (KVStrUpdater if str_keys else KVUpdater)(trampoline)
    return reg


def make_controller(fn):
    """A Registration for KVStoreRunServer's controller fn(head, body)."""
    reg = Registration("controller", fn=fn)

    def trampoline(head, body, _user_data):
        try:
            fn(head, body.decode("utf-8", "replace") if body is not None else "")
            return 0
        except BaseException as exc:
            _remember(exc)
            return -1

    reg.cfunc = KVController(trampoline)
    return reg


def call(cfn, *args, server=False):
    """Calls a library function that may run Python callbacks on this thread, and raises:
    the callback's own exception if one failed the call, else the library's error.
    server=True marks a KVStoreRunServer call, whose callback errors are printed."""
    _pending.exc = None
    _pending.in_server = server
    try:
        rc = cfn(*args)
    finally:
        exc, _pending.exc = getattr(_pending, "exc", None), None
        _pending.in_server = False
    if rc != 0:
        err = make_error(rc)
        if exc is not None:
            if hasattr(exc, "add_note"):
                exc.add_note("raised in a kvstore callback; the library reported: %s"
                             % err.message)
            raise exc
        raise err


def live_registrations():
    """Number of registrations the library still holds (not yet released by the free hook)."""
    with _lock:
        return len(_registry)


def free_hook_calls():
    """How many times the library has called the free hook in this process."""
    with _lock:
        return _stats["free_hook_calls"]
