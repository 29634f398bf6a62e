"""The package installs with pip (offline, from this directory) and finds the library in the
documented order: KVSTORE_LIBRARY, next to the package, then the loader path."""
import os
import shutil
import subprocess
import sys

import pytest

import kvstore
from conftest import PACKAGE_ROOT

SHOW = ("import kvstore; print(kvstore.LIBRARY_PATH); print(kvstore.__file__); "
        "print(kvstore.kv.create('local').type)")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if subprocess.run([sys.executable, "-m", "pip", "--version"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        pytest.skip("pip is not available for %s" % sys.executable)
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    # a clean copy, so the build leaves nothing in the source tree
    shutil.copytree(PACKAGE_ROOT, src, ignore=shutil.ignore_patterns(
        "tests", "build", "*.egg-info", "__pycache__", "libkvstore.so*"))
    site = tmp / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
         "--disable-pip-version-check", "-q", "--target", str(site), str(src)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=str(tmp), timeout=300)
    assert proc.returncode == 0, proc.stdout.decode()
    assert (site / "kvstore" / "__init__.py").is_file()
    return site


def run(site, env_updates, drop=()):
    env = {k: v for k, v in os.environ.items() if k not in drop and k != "PYTHONPATH"}
    env.update(env_updates)
    env["PYTHONPATH"] = str(site)
    # not from the source tree: run elsewhere
    return subprocess.run([sys.executable, "-c", SHOW], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=str(site.parent), timeout=60)


def test_installed_package_uses_kvstore_library(installed):
    proc = run(installed, {"KVSTORE_LIBRARY": kvstore.LIBRARY_PATH})
    assert proc.returncode == 0, proc.stderr.decode()
    path, module, typ = proc.stdout.decode().split()
    assert path == kvstore.LIBRARY_PATH and typ == "local"
    assert module.startswith(str(installed))  # the installed copy, not the source tree


def test_library_next_to_the_package(installed, tmp_path):
    pkg = installed / "kvstore"
    target = pkg / "libkvstore.so.0"
    shutil.copy(os.path.realpath(kvstore.LIBRARY_PATH), target)
    try:
        proc = run(installed, {}, drop=("KVSTORE_LIBRARY", "LD_LIBRARY_PATH"))
        assert proc.returncode == 0, proc.stderr.decode()
        assert proc.stdout.decode().split()[0] == str(target)
    finally:
        target.unlink()


def test_library_on_the_loader_path(installed, tmp_path):
    libdir = tmp_path / "lib"
    libdir.mkdir()
    shutil.copy(os.path.realpath(kvstore.LIBRARY_PATH), libdir / "libkvstore.so.0")
    proc = run(installed, {"LD_LIBRARY_PATH": str(libdir)}, drop=("KVSTORE_LIBRARY",))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().split()[0] == "libkvstore.so.0"


def test_no_library_anywhere_is_a_clear_import_error(installed, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run(installed, {"LD_LIBRARY_PATH": str(empty)}, drop=("KVSTORE_LIBRARY",))
    if proc.returncode == 0:
        pytest.skip("a libkvstore.so.0 is installed on the system loader path")
    err = proc.stderr.decode()
    assert "ImportError" in err and "KVSTORE_LIBRARY" in err and "LD_LIBRARY_PATH" in err
