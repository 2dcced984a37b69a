"""Builds a *platform* wheel for ghbuild_rocm_example.

The package has no Python extension module: its native code is libghbuild_hip.so, built
beforehand by CMake and copied into ghbuild_rocm_example/. BinaryDistribution marks the wheel as
not pure, and since ctypes does not depend on the CPython ABI the tag is py3-none-<platform>.
"""

import os

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 ships bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

PACKAGE = "ghbuild_rocm_example"
LIBRARY = "libghbuild_hip.so"
HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPy(build_py):
    """Refuses to build a wheel without the shared library."""

    def run(self):
        if not os.path.isfile(os.path.join(HERE, PACKAGE, LIBRARY)):
            raise SystemExit("ghbuild_rocm_example: missing %s; copy the built library into %s/ first"
                             % (LIBRARY, os.path.join(HERE, PACKAGE)))
        super().run()


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


class BdistWheel(bdist_wheel):
    def get_tag(self):
        _python, _abi, plat = super().get_tag()
        return "py3", "none", plat


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel})
