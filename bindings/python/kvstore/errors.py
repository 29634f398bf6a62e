"""Exceptions: one class per KV_ERR_* code of the library's error table.

The classes are derived at import time from the loaded library's table (``KVErrorName`` gives
the symbolic name of every code), so a library that appends a code gets a class for it too.
``KV_ERR_SHAPE_MISMATCH`` becomes ``ShapeMismatchError``, ``KV_ERR_TIMEOUT`` becomes
``TimeoutError`` and so on. Every class derives from :class:`KVStoreError`, and where a
Python built-in exception means the same thing it derives from that too (``ShapeMismatchError``
is a ``ValueError``, ``OutOfMemoryError`` a ``MemoryError``, ...), so ``except ValueError``
also works. :class:`KVStoreError` itself is a ``RuntimeError``, as the reference's
``MXNetError`` is, so code written against the reference (``except RuntimeError``) catches
every library failure.
"""
import builtins

from ._lib import LIB

__all__ = ["KVStoreError", "ERROR_CLASSES", "error_class", "check_call", "last_error"]


class KVStoreError(RuntimeError):
    """A failed libkvstore call.

    Attributes: ``code`` (the negative KV_ERR_* value), ``name`` (``"KV_ERR_..."``) and
    ``message`` (the library's message for the failed call, from KVGetLastError).
    """

    code = None
    name = "KV_ERR_UNKNOWN"

    def __init__(self, message, code=None):
        if code is not None:
            self.code = code
            self.name = _name_of(code)
        self.message = message
        super().__init__("%s [%s]" % (message, self.name))

    def __reduce__(self):
        return (type(self), (self.message, self.code))


# Built-in exceptions that mean the same as a library code.
_BUILTIN_BASES = {
    "INVALID_ARGUMENT": ValueError,
    "NULL_POINTER": ValueError,
    "UNKNOWN_KEY": LookupError,
    "DUPLICATE_KEY": ValueError,
    "KEY_KIND_MISMATCH": TypeError,
    "SHAPE_MISMATCH": ValueError,
    "DTYPE_MISMATCH": TypeError,
    "NOT_SUPPORTED": NotImplementedError,
    "OUT_OF_MEMORY": MemoryError,
    "TIMEOUT": builtins.TimeoutError,
    "NETWORK": ConnectionError,
    "PEER_DEAD": ConnectionError,
}

_PREFIX = "KV_ERR_"
_UNKNOWN = "KV_ERR_UNKNOWN"


def _name_of(code):
    return LIB.KVErrorName(code).decode("ascii", "replace")


def _class_name(symbol):
    # "SHAPE_MISMATCH" -> "ShapeMismatchError"
    return "".join(part.capitalize() for part in symbol.split("_")) + "Error"


def _build_table():
    classes = {}
    code = -1
    # The table is contiguous from -1 downwards (codes are only ever appended).
    while code > -1000:
        name = _name_of(code)
        if name == _UNKNOWN or not name.startswith(_PREFIX):
            break
        symbol = name[len(_PREFIX):]
        bases = (KVStoreError,)
        if symbol in _BUILTIN_BASES:
            bases += (_BUILTIN_BASES[symbol],)
        doc = "libkvstore error %s (%d)." % (name, code)
        cls = type(_class_name(symbol), bases,
                   {"code": code, "name": name, "__doc__": doc, "__module__": __name__})
        classes[code] = cls
        code -= 1
    return classes


#: code -> exception class, for every code in the library's table.
ERROR_CLASSES = _build_table()

for _cls in ERROR_CLASSES.values():
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)
del _cls


def error_class(code_or_name):
    """The exception class of a code (-6) or a name ("KV_ERR_SHAPE_MISMATCH" or
    "SHAPE_MISMATCH"); KVStoreError itself for an unknown one."""
    if isinstance(code_or_name, str):
        symbol = code_or_name.upper()
        if not symbol.startswith(_PREFIX):
            symbol = _PREFIX + symbol
        for cls in ERROR_CLASSES.values():
            if cls.name == symbol:
                return cls
        return KVStoreError
    return ERROR_CLASSES.get(code_or_name, KVStoreError)


def last_error():
    """The calling thread's message of the most recent failed library call."""
    msg = LIB.KVGetLastError()
    return msg.decode("utf-8", "replace") if msg else ""


def make_error(code, message=None):
    """An exception instance for a library return code."""
    if message is None:
        message = last_error() or ("libkvstore call failed with %s" % _name_of(code))
    return error_class(code)(message, code)


def check_call(rc):
    """Raise the exception of a non-zero library return code."""
    if rc != 0:
        raise make_error(rc)
