"""Helpers for running the repository's GitHub Actions workflows under act (host mode) in tests.

See harness.py; the stand-ins for remote actions are in standins/.
"""
