"""Engine tests: the real Docker engine, registry and S3 (see conftest.py). A package, so that this
folder's conftest does not shadow tests/conftest.py, which the unit tests import as `conftest`."""
