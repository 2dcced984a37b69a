"""sccache settings that must be right before anything reaches a build.

Pure checks here; the S3 preflight that talks to the endpoint lives with the build executor.
"""

from __future__ import annotations

from urllib.parse import urlsplit

BOOL_TRUE = ("true", "on", "1")
BOOL_FALSE = ("false", "off", "0")


def parse_bool(value: str) -> bool:
    """sccache's own booleans: only true|on|1|false|off|0 (SPEC 4); anything else is an error."""
    text = value.strip().lower()
    if text in BOOL_TRUE:
        return True
    if text in BOOL_FALSE:
        return False
    raise ValueError("expected one of true, on, 1, false, off, 0")


def check_endpoint(value: str) -> str:
    """Return the endpoint if it is a plain http(s) URL, else raise ValueError.

    The message never contains the value: an endpoint with user info carries a credential.
    An empty value means "no endpoint" (AWS) and is returned as "".
    """
    if value == "":
        return ""
    if any(c in value for c in "\r\n\t "):
        raise ValueError("endpoint contains whitespace or a newline (value not shown)")
    if "?" in value or "#" in value:
        raise ValueError("endpoint contains '?' or '#' (value not shown)")
    try:
        parts = urlsplit(value)
        port = parts.port  # raises on a bad port
    except ValueError:
        raise ValueError("endpoint is not a valid URL (value not shown)") from None
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        raise ValueError("endpoint contains user info; pass credentials as secrets (value not shown)")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("endpoint must be an http:// or https:// URL with a host (value not shown)")
    del port
    return value
