"""ghbuild: container-image CI for large native projects on GitHub Actions."""

__version__ = "0.1.0"
