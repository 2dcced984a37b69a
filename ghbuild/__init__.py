"""ghbuild: container-image CI for large native projects on GitHub Actions."""

try:  # written by setuptools-scm when the package is built or installed (see pyproject.toml)
    from ghbuild._version import version as __version__
except ImportError:  # a source tree that was never installed
    __version__ = "0+unknown"
