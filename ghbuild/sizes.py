"""Sizes in bytes, read as people write them ("500MB", "1.5GB", "200MiB") and printed as docker prints them.

Pure, and light enough for the command line's argument types (imported before any command runs).
"""

from __future__ import annotations

import re

_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
               "t": 10**12, "tb": 10**12, "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20, "gi": 2**30,
               "gib": 2**30, "ti": 2**40, "tib": 2**40}


def parse_size(value: int | str) -> int:
    """Bytes from 123, "500MB", "1.5GB", "200MiB" (decimal units as docker prints them)."""
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", value)
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"{value!r} is not a size (e.g. 500MB, 1.5GB, 200MiB)")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])


def format_size(size: int) -> str:
    for unit, factor in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= factor:
            return f"{size / factor:.2f} {unit}"
    return f"{size} B"
