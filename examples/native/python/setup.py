"""Builds a *platform* wheel for ghbuild_example.

The package has no Python extension module: its native code is two shared libraries built
beforehand (CMake and cargo) and copied into ghbuild_example/. setuptools would call that a
pure wheel (py3-none-any), which would be wrong. BinaryDistribution says the package has
native code (so the files go to platlib, the wheel's root, and the wheel is not pure), and
since ctypes does not depend on the CPython ABI the tag is py3-none-<platform>
(e.g. py3-none-linux_x86_64, py3-none-linux_aarch64).
"""

import os

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 ships bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # Debian bookworm: python3-setuptools 66 + python3-wheel 0.38
    from wheel.bdist_wheel import bdist_wheel

PACKAGE = "ghbuild_example"
LIBRARIES = ("libnativecore.so", "libnative_rs.so")
HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPy(build_py):
    """Refuses to build a wheel that would lack the shared libraries."""

    def run(self):
        missing = [lib for lib in LIBRARIES if not os.path.isfile(os.path.join(HERE, PACKAGE, lib))]
        if missing:
            raise SystemExit(
                "ghbuild_example: missing %s; copy the built libraries into %s/ first"
                % (", ".join(missing), os.path.join(HERE, PACKAGE))
            )
        super().run()


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


class BdistWheel(bdist_wheel):
    def get_tag(self):
        _python, _abi, plat = super().get_tag()
        return "py3", "none", plat


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel})
