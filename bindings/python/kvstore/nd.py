"""``kvstore.nd``: the NDArray namespace, as ``mx.nd``.

    >>> from kvstore import nd, cpu
    >>> a = nd.ones((2, 3), cpu(0)) * 2
    >>> a.asnumpy()
    array([[2., 2., 2.],
           [2., 2., 2.]], dtype=float32)
"""
from .ndarray import NDArray, array, empty, full, ones, zeros  # noqa: F401
from .context import Context, cpu, gpu  # noqa: F401
from .kv import waitall  # noqa: F401
from . import sparse  # noqa: F401  (nd.sparse.row_sparse_array, RowSparseNDArray)

__all__ = ["NDArray", "array", "empty", "full", "ones", "zeros", "Context", "cpu", "gpu",
           "waitall", "sparse"]
