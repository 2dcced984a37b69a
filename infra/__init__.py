"""Local infrastructure for developing and testing ghbuild (``python -m infra up|down|status``, from the
repository root).

Development tooling, not part of the ghbuild wheel. Standard library only (it never imports ghbuild), so it
runs before the project's own dependencies are installed.
"""

from .cli import main

__all__ = ["main"]
