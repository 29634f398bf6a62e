"""Installs the kvstore Python package (pure Python over ctypes).

    /usr/bin/python3 -m pip install bindings/python

There is deliberately no pyproject.toml: pip then builds with the setuptools already
installed (Debian's python3-setuptools) instead of downloading one into an isolated build
environment, so the install works offline. The native library is not part of the package:
point KVSTORE_LIBRARY at it, copy libkvstore.so.0 into the package directory before
installing (it is then installed with the package), or install it on the loader path.
"""
import os

from setuptools import setup

_here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_here, "README.md"), encoding="utf-8") as f:
    _readme = f.read()

setup(
    name="kvstore",
    version="0.1.0",
    description="Python binding (ctypes) of libkvstore, a parameter-synchronisation store "
                "for data-parallel training",
    long_description=_readme,
    long_description_content_type="text/markdown",
    packages=["kvstore"],
    package_data={"kvstore": ["libkvstore.so*"]},
    python_requires=">=3.7",
    install_requires=["numpy"],
    classifiers=[
        "Programming Language :: Python :: 3",
        "Operating System :: POSIX :: Linux",
    ],
)
