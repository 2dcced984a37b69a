"""Local infrastructure for ghbuild (``python -m ghbuild.infra up|down|status``).

Standard library only, so it runs before the project's own dependencies are installed.
"""

from .cli import main

__all__ = ["main"]
