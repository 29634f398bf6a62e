"""Lets the examples run from a source checkout: when the kvstore package is not installed,
use the one in bindings/python of this repository. The native library is still located as
usual (KVSTORE_LIBRARY, next to the package, or libkvstore.so.0 on the loader path)."""
import os
import sys

try:
    import kvstore  # noqa: F401  (installed, or on PYTHONPATH)
except ImportError:
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(_here, "..", "..", "bindings", "python"))
