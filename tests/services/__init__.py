"""Tests that need a service process (see conftest.py): a package, so its conftest does not shadow tests/conftest.py."""
