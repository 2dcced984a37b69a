"""HTTP helpers shared by the registry client (ghbuild.registry.client) and the retention API clients
(ghbuild.retention): Retry-After parsing, loopback detection, a requests.Session factory that keeps
loopback traffic away from proxies, and the bounded retry loop of the Docker Hub and GitHub API clients.

`requests` is imported where it is used, never at import time (start-up time matters).
"""

from __future__ import annotations

import email.utils
import re
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import Any

from ghbuild.errors import TransientError

Log = Callable[[str], None]

_DELTA_SECONDS = re.compile(r"\d+(?:\.\d+)?")


def retry_after_seconds(value: str | None, clock: Callable[[], float] = time.time) -> float | None:
    """Retry-After (RFC 9110 10.2.3) as seconds to wait: delay-seconds or an HTTP-date (measured against
    `clock`, seconds since the epoch; a date in the past is 0). None when absent or unreadable."""
    value = str(value or "").strip()
    if not value:
        return None
    if _DELTA_SECONDS.fullmatch(value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - clock())


def new_session(target: str):
    """A requests.Session for `target` (a host or URL): never sends loopback traffic through a proxy."""
    import requests

    from ghbuild.http.origin import is_loopback

    session = requests.Session()
    if is_loopback(target):
        session.trust_env = False
    return session


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


class RetryingClient:
    """One API endpoint, one requests.Session, bounded retries: rate limits waited out (capped at
    `max_wait`, `rate_attempts` at most), 5xx answers and network errors retried `error_attempts` times
    with exponential `backoff`.

    Subclasses set `service` (for messages), `unreachable_error` (raised when the network keeps failing)
    and `rate_limit_error` (raised when the rate limit outlasts the attempts), and may override
    `rate_wait` (which answers mean "rate limited") and `scrub` (secrets out of messages).
    """

    service = "API"
    unreachable_error: type[Exception] = TransientError
    rate_limit_error: type[Exception] = TransientError

    def __init__(self, api_url: str, *, session=None, sleep: Callable[[float], None] = time.sleep,
                 log: Log | None = None, clock: Callable[[], float] = time.time, max_wait: float = 120.0,
                 rate_attempts: int = 6, error_attempts: int = 3, backoff: float = 1.0,
                 timeout: tuple[float, float] = (10.0, 60.0)):
        self.api_url = api_url.rstrip("/")
        self.session = session if session is not None else new_session(self.api_url)
        self.sleep, self.clock = sleep, clock
        self.log = log or _stderr
        self.max_wait, self.rate_attempts, self.error_attempts = max_wait, rate_attempts, error_attempts
        self.backoff, self.timeout = backoff, timeout

    def scrub(self, text: str) -> str:
        return text

    def rate_wait(self, r) -> float | None:
        """Seconds to wait before retrying when `r` says "rate limited" (-1: no hint, back off); None otherwise."""
        if r.status_code == 429:
            wait = retry_after_seconds(r.headers.get("Retry-After"), self.clock)
            return wait if wait is not None else -1.0
        return None

    def wait(self, seconds: float, why: str) -> None:
        self.log(f"waiting {seconds:g}s: {why}")
        self.sleep(seconds)

    def request(self, method: str, url: str, what: str, *, headers: Mapping[str, str] | None = None,
                json_body: Any = None):
        """Send one request with the retries above; the last 5xx answer is returned, not raised."""
        import requests

        rate_tries = error_tries = 0
        while True:
            try:
                r = self.session.request(method, url, headers=dict(headers or {}), json=json_body,
                                         timeout=self.timeout, allow_redirects=False)
            except requests.RequestException as exc:
                error_tries += 1
                if error_tries >= self.error_attempts:
                    raise self.unreachable_error(self.scrub(
                        f"{what}: {self.service} unreachable after {error_tries} attempts: "
                        f"{type(exc).__name__}: {exc}")) from None
                self.wait(self.backoff * 2 ** (error_tries - 1), f"{what}: {type(exc).__name__}")
                continue
            wait = self.rate_wait(r)
            if wait is not None:
                rate_tries += 1
                if rate_tries >= self.rate_attempts:
                    raise self.rate_limit_error(f"{what}: {self.service} still rate limits after {rate_tries} "
                                                f"attempts (HTTP {r.status_code})")
                if wait < 0:
                    wait = self.backoff * 2 ** (rate_tries - 1)
                if wait > self.max_wait:
                    self.log(f"{self.service} asks to wait {wait:g}s; waiting {self.max_wait:g}s (the cap)")
                self.wait(min(wait, self.max_wait), f"{what}: HTTP {r.status_code} rate limited")
                continue
            if r.status_code >= 500:
                error_tries += 1
                if error_tries >= self.error_attempts:
                    return r
                self.wait(self.backoff * 2 ** (error_tries - 1), f"{what}: HTTP {r.status_code}")
                continue
            return r
