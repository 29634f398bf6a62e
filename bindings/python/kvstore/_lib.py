"""Loading of libkvstore and the ctypes prototypes of its whole C ABI.

Every function of include/kvstore/kvstore.h is declared here with its argtypes and restype;
nothing else in the package calls the library through an undeclared symbol.

The library is found, in this order:

1. the environment variable ``KVSTORE_LIBRARY`` (a full path to libkvstore.so*),
2. a ``libkvstore.so.0`` (or ``libkvstore.so``) file next to this package's ``__init__.py``,
3. ``libkvstore.so.0`` on the dynamic loader's search path (``LD_LIBRARY_PATH``,
   ``/etc/ld.so.conf``, the system directories).
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, c_char_p, c_double, c_int, c_int64, c_size_t,
                    c_void_p)

__all__ = ["LIB", "LIBRARY_PATH", "KVArrayHandle", "KVStoreHandle", "KVUpdater",
           "KVStrUpdater", "KVFreeFn", "KVController", "PROTOTYPES"]

SONAME = "libkvstore.so.0"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    """The library paths to try, with a note on where each one came from."""
    env = os.environ.get("KVSTORE_LIBRARY")
    if env:
        # An explicit setting is authoritative: no silent fallback to another library.
        return [(env, "the environment variable KVSTORE_LIBRARY")]
    found = []
    for name in (SONAME, "libkvstore.so"):
        path = os.path.join(_PACKAGE_DIR, name)
        if os.path.exists(path):
            found.append((path, "the package directory"))
    found.append((SONAME, "the dynamic loader's search path"))
    return found


def _load():
    errors = []
    for path, origin in _candidates():
        if origin.startswith("the environment") and not os.path.isfile(path):
            raise ImportError(
                "kvstore: KVSTORE_LIBRARY=%r does not name an existing file; set it to the "
                "full path of libkvstore.so (e.g. build/libkvstore.so)" % path)
        try:
            return ctypes.CDLL(path), path
        except OSError as exc:
            errors.append("%s (from %s): %s" % (path, origin, exc))
    raise ImportError(
        "kvstore: cannot load the native library libkvstore. Set KVSTORE_LIBRARY to its full "
        "path, copy libkvstore.so.0 next to the kvstore package (%s), or put its directory on "
        "LD_LIBRARY_PATH. Tried:\n  %s" % (_PACKAGE_DIR, "\n  ".join(errors)))


# Handles are pointers to distinct incomplete structs, as in the header: ctypes then refuses
# a store handle where an array handle is expected (ctypes.ArgumentError), and vice versa.
class _KVArray(ctypes.Structure):
    """Opaque struct KVArray_."""


class _KVStore(ctypes.Structure):
    """Opaque struct KVStore_."""


KVArrayHandle = POINTER(_KVArray)
KVStoreHandle = POINTER(_KVStore)

# typedef int (*KVUpdater)(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data);
KVUpdater = CFUNCTYPE(c_int, c_int, KVArrayHandle, KVArrayHandle, c_void_p)
# typedef int (*KVStrUpdater)(const char* key, KVArrayHandle recv, KVArrayHandle stored, void*);
KVStrUpdater = CFUNCTYPE(c_int, c_char_p, KVArrayHandle, KVArrayHandle, c_void_p)
# typedef void (*KVFreeFn)(void* user_data);
KVFreeFn = CFUNCTYPE(None, c_void_p)
# typedef int (*KVController)(int head, const char* body, void* user_data);
KVController = CFUNCTYPE(c_int, c_int, c_char_p, c_void_p)

_P = POINTER
_HANDLES = _P(KVArrayHandle)
_STRS = _P(c_char_p)
_INTS = _P(c_int)

# name: (restype, [argtypes]) for every function of the public header, in header order.
PROTOTYPES = {
    # version, features, errors
    "KVGetVersion": (c_int, []),
    "KVGetVersionString": (c_char_p, []),
    "KVHasFeature": (c_int, [c_int]),
    "KVGetGpuCount": (c_int, [_P(c_int)]),
    "KVGetLastError": (c_char_p, []),
    "KVErrorName": (c_char_p, [c_int]),
    # arrays
    "KVArrayCreate": (c_int, [_P(c_int64), c_int, c_int, c_int, c_int, _P(KVArrayHandle)]),
    "KVArrayFree": (c_int, [KVArrayHandle]),
    "KVArrayGetNDim": (c_int, [KVArrayHandle, _P(c_int)]),
    "KVArrayGetShape": (c_int, [KVArrayHandle, _P(c_int64), c_int, _P(c_int)]),
    "KVArrayGetSize": (c_int, [KVArrayHandle, _P(c_int64)]),
    "KVArrayGetNBytes": (c_int, [KVArrayHandle, _P(c_size_t)]),
    "KVArrayGetDType": (c_int, [KVArrayHandle, _P(c_int)]),
    "KVArrayGetContext": (c_int, [KVArrayHandle, _P(c_int), _P(c_int)]),
    "KVDTypeSize": (c_size_t, [c_int]),
    "KVDTypeName": (c_char_p, [c_int]),
    "KVArrayGetData": (c_int, [KVArrayHandle, _P(c_void_p)]),
    "KVArrayCopyFromHost": (c_int, [KVArrayHandle, c_void_p, c_size_t]),
    "KVArrayCopyToHost": (c_int, [KVArrayHandle, c_void_p, c_size_t]),
    "KVArrayCopy": (c_int, [KVArrayHandle, KVArrayHandle]),
    "KVArrayFill": (c_int, [KVArrayHandle, c_double]),
    "KVArrayBinary": (c_int, [c_int, KVArrayHandle, KVArrayHandle, KVArrayHandle]),
    "KVArrayBinaryScalar": (c_int, [c_int, KVArrayHandle, c_double, KVArrayHandle]),
    "KVArrayWaitToRead": (c_int, [KVArrayHandle]),
    # row-sparse arrays
    "KVArrayCreateRowSparse": (c_int, [_P(c_int64), c_int, c_int, c_int, c_int, _P(c_int64), c_int64,
                                       _P(KVArrayHandle)]),
    "KVArrayGetStorageType": (c_int, [KVArrayHandle, _P(c_int)]),
    "KVArrayGetNumRows": (c_int, [KVArrayHandle, _P(c_int64)]),
    "KVArrayGetRowIds": (c_int, [KVArrayHandle, _P(c_int64), c_int64]),
    "KVArrayCastStorage": (c_int, [KVArrayHandle, c_int, _P(KVArrayHandle)]),
    # stores
    "KVStoreCreate": (c_int, [c_char_p, _P(KVStoreHandle)]),
    "KVStoreFree": (c_int, [KVStoreHandle]),
    "KVStoreGetType": (c_int, [KVStoreHandle, _P(c_char_p)]),
    "KVStoreInit": (c_int, [KVStoreHandle, c_int, _INTS, _HANDLES]),
    "KVStoreInitStr": (c_int, [KVStoreHandle, c_int, _STRS, _HANDLES]),
    "KVStorePush": (c_int, [KVStoreHandle, c_int, _INTS, _HANDLES, c_int]),
    "KVStorePushStr": (c_int, [KVStoreHandle, c_int, _STRS, _HANDLES, c_int]),
    "KVStorePull": (c_int, [KVStoreHandle, c_int, _INTS, _HANDLES, c_int]),
    "KVStorePullStr": (c_int, [KVStoreHandle, c_int, _STRS, _HANDLES, c_int]),
    "KVStoreRowSparsePull": (c_int, [KVStoreHandle, c_int, _INTS, _HANDLES, _HANDLES, c_int]),
    "KVStoreRowSparsePullStr": (c_int, [KVStoreHandle, c_int, _STRS, _HANDLES, _HANDLES, c_int]),
    "KVStorePushPull": (c_int, [KVStoreHandle, c_int, _INTS, _HANDLES, c_int, _INTS, _HANDLES,
                                c_int]),
    "KVStorePushPullStr": (c_int, [KVStoreHandle, c_int, _STRS, _HANDLES, c_int, _STRS,
                                   _HANDLES, c_int]),
    "KVStoreBroadcast": (c_int, [KVStoreHandle, c_int, _INTS, _HANDLES, c_int, _INTS, _HANDLES,
                                 c_int]),
    "KVStoreBroadcastStr": (c_int, [KVStoreHandle, c_int, _STRS, _HANDLES, c_int, _STRS,
                                    _HANDLES, c_int]),
    "KVStoreSetUpdater": (c_int, [KVStoreHandle, KVUpdater, c_void_p, KVFreeFn]),
    "KVStoreSetStrUpdater": (c_int, [KVStoreHandle, KVStrUpdater, c_void_p, KVFreeFn]),
    "KVStoreSetOptimizer": (c_int, [KVStoreHandle, c_char_p]),
    "KVStoreSaveOptimizerStates": (c_int, [KVStoreHandle, c_char_p]),
    "KVStoreLoadOptimizerStates": (c_int, [KVStoreHandle, c_char_p]),
    "KVStoreSetGradientCompression": (c_int, [KVStoreHandle, c_int, _STRS, _STRS]),
    "KVStoreIsCapable": (c_int, [KVStoreHandle, c_char_p, _P(c_int)]),
    "KVStoreGetRank": (c_int, [KVStoreHandle, _P(c_int)]),
    "KVStoreGetGroupSize": (c_int, [KVStoreHandle, _P(c_int)]),
    "KVStoreBarrier": (c_int, [KVStoreHandle]),
    "KVStoreWaitAll": (c_int, [KVStoreHandle]),
    "KVStoreGetNumDeadNode": (c_int, [KVStoreHandle, c_int, c_int, _P(c_int)]),
    "KVStoreSetBarrierBeforeExit": (c_int, [KVStoreHandle, c_int]),
    "KVStoreSendCommandToServers": (c_int, [KVStoreHandle, c_int, c_char_p]),
    "KVStoreRunServer": (c_int, [KVStoreHandle, KVController, c_void_p]),
    "KVIsWorkerNode": (c_int, []),
    "KVIsServerNode": (c_int, []),
    "KVIsSchedulerNode": (c_int, []),
    # profiling
    "KVProfileStart": (c_int, [c_char_p]),
    "KVProfileStop": (c_int, []),
    "KVProfileGetStats": (c_int, [c_char_p, c_size_t, _P(c_size_t)]),
}


def _declare(lib):
    missing = []
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise ImportError("kvstore: the loaded library %s lacks the symbols %s; it is not a "
                          "libkvstore matching this binding" % (LIBRARY_PATH, ", ".join(missing)))


def _unchecked(lib, names):
    """Second entry points to the named functions, with no argtypes: ctypes then converts
    each argument by its Python type alone, without a from_param call per argument (which
    costs more than the library's own work in a one-key push). Only the store's hot paths
    call these, and only with arguments of these kinds: the KVStoreHandle, Python ints
    (C int), and bytes for the pointer arguments (const int* keys, const char* const* keys,
    const KVArrayHandle* arrays: a bytes object is passed as a pointer to its contents, which
    the library only reads). Everything else goes through LIB's declared prototypes."""
    out = {}
    for name in names:
        fn = lib._FuncPtr((name, lib))
        fn.restype = c_int
        out[name] = fn
    return out


LIB, LIBRARY_PATH = _load()
_declare(LIB)
#: The hot path's undeclared entry points (see _unchecked).
UNCHECKED = _unchecked(LIB, ("KVStorePush", "KVStorePull", "KVStorePushPull", "KVStorePushStr",
                             "KVStorePullStr", "KVStorePushPullStr"))
