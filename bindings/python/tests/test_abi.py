"""The ctypes layer against the public headers: every function of kvstore.h is declared with
argtypes and restype of the right arity, the exception classes cover kvstore_errors.h, and
handle types are distinct."""
import ctypes
import os
import re

import pytest

import kvstore
from kvstore import _lib, kv, nd
from conftest import REPO_ROOT

HEADER = os.path.join(REPO_ROOT, "include", "kvstore", "kvstore.h")
ERRORS_HEADER = os.path.join(REPO_ROOT, "include", "kvstore", "kvstore_errors.h")


def header_functions():
    with open(HEADER) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    funcs = {}
    for m in re.finditer(r"KVSTORE_API\s+([^;]*?)\b(KV\w+)\s*\(([^)]*)\)\s*;", text):
        params = m.group(3).strip()
        funcs[m.group(2)] = 0 if params in ("", "void") else len(params.split(","))
    return funcs


def test_every_header_function_is_declared():
    funcs = header_functions()
    assert len(funcs) >= 45  # the parse found the API
    assert sorted(funcs) == sorted(_lib.PROTOTYPES)
    for name, nargs in funcs.items():
        fn = getattr(_lib.LIB, name)
        assert fn.argtypes is not None and len(fn.argtypes) == nargs, name
        assert fn.restype is _lib.PROTOTYPES[name][0], name


def test_dtype_table_is_the_library_s():
    from kvstore.ndarray import SUPPORTED_DTYPES, dtype_code
    names = [_lib.LIB.KVDTypeName(code) for code in range(16)]
    named = [n.decode("ascii") for n in names if n is not None]
    assert [str(d) for d in SUPPORTED_DTYPES] == named
    for dt in SUPPORTED_DTYPES:
        assert _lib.LIB.KVDTypeName(dtype_code(dt)).decode("ascii") == str(dt)


def test_error_classes_cover_the_table():
    with open(ERRORS_HEADER) as f:
        table = re.findall(r"X\((\w+),\s*(-\d+),", f.read())
    assert len(table) >= 18
    for symbol, value in table:
        cls = kvstore.ERROR_CLASSES[int(value)]
        assert cls.name == "KV_ERR_" + symbol and cls.code == int(value)
        assert issubclass(cls, kvstore.KVStoreError)
        assert getattr(kvstore, cls.__name__) is cls
        assert kvstore.error_class(symbol) is cls
        assert kvstore.error_class("KV_ERR_" + symbol) is cls
    assert len(kvstore.ERROR_CLASSES) == len(table)
    assert kvstore.error_class(-999) is kvstore.KVStoreError
    assert issubclass(kvstore.TimeoutError, TimeoutError)
    assert issubclass(kvstore.OutOfMemoryError, MemoryError)


def test_every_library_error_is_a_runtime_error():
    """As the reference's MXNetError: `except RuntimeError` catches every library failure."""
    assert issubclass(kvstore.KVStoreError, RuntimeError)
    assert all(issubclass(cls, RuntimeError) for cls in kvstore.ERROR_CLASSES.values())
    with kv.create("local") as s:
        with pytest.raises(RuntimeError) as info:
            s.pull(12345, out=nd.zeros(2))
    assert isinstance(info.value, kvstore.UnknownKeyError)
    assert isinstance(info.value, LookupError)  # the built-in base stays too


def test_error_objects_carry_code_name_message():
    err = kvstore.errors.make_error(-3, "key 5 is not initialised")
    assert isinstance(err, kvstore.UnknownKeyError)
    assert (err.code, err.name, err.message) == (-3, "KV_ERR_UNKNOWN_KEY",
                                                 "key 5 is not initialised")
    assert "key 5" in str(err) and "KV_ERR_UNKNOWN_KEY" in str(err)


def test_handles_are_distinct_types():
    a = nd.ones(3)
    with kv.create("local") as s:
        with pytest.raises(ctypes.ArgumentError):
            _lib.LIB.KVArrayFill(s.handle, 1.0)
        with pytest.raises(ctypes.ArgumentError):
            _lib.LIB.KVStoreBarrier(a.handle)


def test_null_handle_is_an_error_not_a_crash():
    with pytest.raises(kvstore.NullPointerError):
        kvstore.errors.check_call(_lib.LIB.KVArrayFill(_lib.KVArrayHandle(), 1.0))
    with pytest.raises(TypeError):
        nd.NDArray(_lib.KVArrayHandle())
    with pytest.raises(TypeError):
        kv.KVStore(_lib.KVStoreHandle())


def test_version_and_features():
    assert kvstore.library_version() == "%d.%d.%d" % tuple(
        int(x) for x in re.findall(r"#define KVSTORE_VERSION_(?:MAJOR|MINOR|PATCH) (\d+)",
                                   open(HEADER).read()))
    for f in ("cuda", "nccl", "dist"):
        assert kvstore.has_feature(f) in (True, False)
    with pytest.raises(ValueError):
        kvstore.has_feature("quantum")
    assert kvstore.num_gpus() >= 0
    assert kv.is_worker_node() in (True, False)


def test_library_lookup_order(tmp_path):
    """KVSTORE_LIBRARY wins; a bad KVSTORE_LIBRARY is a clear ImportError."""
    import subprocess
    import sys
    from conftest import subprocess_env
    env = subprocess_env()
    code = "import kvstore; print(kvstore.LIBRARY_PATH)"
    out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                         check=True).stdout.decode().strip()
    assert out == kvstore.LIBRARY_PATH
    env["KVSTORE_LIBRARY"] = str(tmp_path / "nope.so")
    proc = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    assert proc.returncode != 0
    assert b"KVSTORE_LIBRARY" in proc.stderr and b"does not name an existing file" in proc.stderr
