"""Where a URL points: its origin (scheme, host, effective port), whether credentials may follow a redirect,
and whether a host or URL names this machine. The one `same_origin` of the package."""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import SplitResult, urlsplit

from ghbuild.http.errors import InvalidURL

Origin = tuple[str, str, int]


def default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def port_of(parts: SplitResult, what: str) -> int:
    """The port a request to these URL parts connects to (the scheme's default when none is written)."""
    try:
        port = parts.port
    except ValueError:
        raise InvalidURL(f"{what}: the port is not a number from 0 to 65535") from None
    return port or default_port(parts.scheme)


def origin(url: str) -> Origin:
    """(scheme, lower-case host, effective port): `https://Reg.example/` and `https://reg.example:443/x` are
    one origin. An unreadable port is -1 (no other origin has it)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    return parts.scheme, (parts.hostname or "").lower(), port or default_port(parts.scheme)


def same_origin(a: str, b: str) -> bool:
    return origin(a) == origin(b)


def keeps_credentials(old: str, new: str) -> bool:
    """Authorization goes along only to the same origin, or from http to https on the same host on the default
    ports (an http registry that upgrades, as `requests` allows)."""
    was, now = origin(old), origin(new)
    return was == now or ((was[0], now[0]) == ("http", "https") and was[1] == now[1] and (was[2], now[2]) == (80, 443))


_LOOPBACK: tuple[tuple[int, Callable[[bytes], bool]], ...] = (
    (socket.AF_INET, lambda a: a[0] == 127),                       # 127.0.0.0/8
    (socket.AF_INET6, lambda a: a == bytes(15) + b"\x01"),          # ::1
)


def is_loopback(target: str) -> bool:
    """Whether a host (`127.0.0.1`, `localhost:5000`, `[::1]:5000`, `::1`) or a URL
    (`http://localhost:8080/v2/`) names this machine: `localhost` or a loopback address."""
    target = (target or "").strip()
    if "://" in target:
        name = urlsplit(target).hostname or ""
    elif target.startswith("["):
        name = target[1:].split("]", 1)[0]
    elif target.count(":") > 1:   # a bare IPv6 address
        name = target
    else:
        name = target.rsplit(":", 1)[0]
    name = name.lower()
    if name == "localhost":
        return True
    for family, loopback in _LOOPBACK:
        address = name.split("%", 1)[0] if family == socket.AF_INET6 else name    # ::1%lo: the zone is no part
        try:
            return loopback(socket.inet_pton(family, address))
        except (OSError, ValueError):   # ValueError: a NUL in the name
            continue
    return False   # another name, even one that starts with "127."
