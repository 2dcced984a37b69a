"""What can go wrong on the way to an answer, in two families a caller must tell apart:

- RequestException (an OSError, as in `requests`): no answer arrived, or not a whole one; another attempt may
  get one (HTTPConnectionError, HTTPTimeout), or not (TooManyRedirects);
- PermanentError: a setting or a URL this client cannot use; retrying cannot help, and a caller must never
  treat it as a network hiccup.

The names avoid the builtins ConnectionError and TimeoutError: `except ConnectionError` in a module that
imported ours would silently stop catching the builtin one.
"""

from __future__ import annotations


class RequestException(OSError):
    """Any failure to get an answer (the name and the OSError base follow `requests`)."""


class HTTPConnectionError(RequestException):
    """The connection failed, was refused, reset or closed before a whole answer arrived."""


class HTTPTimeout(HTTPConnectionError):
    """No connection or no data within the timeout."""


class TooManyRedirects(RequestException):
    pass


class HTTPError(RequestException):
    """raise_for_status() on a 4xx or 5xx answer."""


class PermanentError(Exception):
    """A failure that a retry cannot fix (callers must not treat it as a network hiccup)."""


class UnusableSetting(PermanentError, ValueError):
    """A setting from the environment or the caller: a proxy URL this client cannot use, a CA bundle that does
    not exist or holds no certificate, a proxy that refuses the credentials it was given."""


class CannotResend(PermanentError):
    """A redirect after a streamed body: the body is spent, and the same request would be redirected again."""


class InvalidURL(PermanentError):
    """A URL that cannot be requested: a bad port, an unsupported scheme, no host."""
