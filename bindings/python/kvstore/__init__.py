"""kvstore: Python binding of libkvstore, the parameter-synchronisation store.

    >>> from kvstore import kv, nd, cpu, gpu
    >>> store = kv.create('local')
    >>> store.init(3, nd.ones((2, 3)) * 2)
    >>> a = nd.zeros((2, 3))
    >>> store.pull(3, out=a)
    >>> a.asnumpy()
    array([[2., 2., 2.],
           [2., 2., 2.]], dtype=float32)

The native library is found through the environment variable KVSTORE_LIBRARY (a full path),
else next to this package, else as libkvstore.so.0 on the loader path.
"""
from ._lib import LIBRARY_PATH, LIB
from . import errors
from .errors import KVStoreError, ERROR_CLASSES, error_class
from .errors import *  # noqa: F401,F403  (one class per KV_ERR_* code)
from .context import Context, cpu, gpu, num_gpus, current_context
from .ndarray import NDArray
from . import nd, np, kv, optimizer, profiler

__all__ = ["kv", "nd", "np", "optimizer", "profiler", "cpu", "gpu", "Context", "num_gpus", "current_context", "NDArray",
           "KVStoreError", "ERROR_CLASSES", "error_class", "errors", "LIBRARY_PATH",
           "library_version", "has_feature", "FEATURE_CUDA", "FEATURE_NCCL", "FEATURE_DIST",
           "__version__"] + [cls.__name__ for cls in ERROR_CLASSES.values()]

FEATURE_CUDA, FEATURE_NCCL, FEATURE_DIST = 1, 2, 3

#: Version of this binding.
__version__ = "0.1.0"


def library_version():
    """The loaded library's version string, "MAJOR.MINOR.PATCH"."""
    return LIB.KVGetVersionString().decode("ascii")


def has_feature(feature):
    """Whether the library was built with FEATURE_CUDA, FEATURE_NCCL or FEATURE_DIST (or
    'cuda', 'nccl', 'dist')."""
    if isinstance(feature, str):
        names = {"cuda": FEATURE_CUDA, "nccl": FEATURE_NCCL, "dist": FEATURE_DIST}
        if feature.lower() not in names:
            raise ValueError("unknown feature %r; known: cuda, nccl, dist" % feature)
        feature = names[feature.lower()]
    return bool(LIB.KVHasFeature(int(feature)))
