"""The one retry policy of every ghbuild HTTP client: the registry client (ghbuild.registry.client), the Docker
Hub and GitHub API clients (ghbuild.retention) and the artifact download (ghbuild.publish.records).

What is retried: network errors (no whole answer), 429 and 5xx answers. How long is waited before each retry:
the server's Retry-After (RFC 9110 10.2.3, delay-seconds or an HTTP-date) when it sent one, else a capped
exponential backoff; no wait is longer than `max_wait`. How often: `attempts` tries in all, and (when set)
`rate_attempts` tries while rate limited, counted apart. A request body that cannot be sent again (a stream)
is never retried: only what can be sent again twice is.

Two ways to use it, one policy: `Retrier.call(fn, what)` retries a whole operation of several requests
(the registry: a blob copy restarts from a fresh source stream) whenever it raises TransientError;
`RetryingClient.request` retries one request, on a ghbuild.http.session.Session.
"""

from __future__ import annotations

import email.utils
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any, NamedTuple, TypeVar

from ghbuild.errors import TransientError
from ghbuild.http.errors import PermanentError, RequestException
from ghbuild.http.response import Response
from ghbuild.http.session import Session, session_for
from ghbuild.http.transport import Body

Log = Callable[[str], None]
T = TypeVar("T")

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


@dataclass(frozen=True)
class RetryPolicy:
    """When to try again, and how long to wait first.

    attempts: tries in all while failing (the first one included); rate_attempts: tries while rate limited
    (429), counted apart, or None to count them against `attempts`. The n-th retry waits `delay * factor **
    (n - 1)` (factor 1: a constant delay), or what the server's Retry-After asks, never less than `min_wait`;
    no wait is longer than `max_wait`.
    """

    attempts: int = 3
    delay: float = 1.0
    factor: float = 2.0
    max_wait: float = 120.0
    min_wait: float = 0.0
    rate_attempts: int | None = None

    def backoff(self, retry: int) -> float:
        return min(self.max_wait, self.delay * self.factor ** (retry - 1))

    def wait(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds before the `retry`-th retry (1, 2, ...) of its kind, given the server's Retry-After."""
        if retry_after is None:
            return self.backoff(retry)
        return min(self.max_wait, max(self.min_wait, retry_after))


class Busy(Exception):
    """The answer that made a failure worth retrying: a rate limit or a 5xx, with the seconds its Retry-After
    asks for (None: it says nothing). It rides as the cause of the TransientError raised for that answer
    (`transient_error`), where the Retrier reads it; `response` is the answer itself when a caller wants it."""

    def __init__(self, status: int, retry_after: float | None = None, *, rate_limited: bool = False,
                 response: Response | None = None):
        super().__init__(f"HTTP {status}" + (f", Retry-After {retry_after:g}s" if retry_after is not None else ""))
        self.status, self.retry_after, self.rate_limited, self.response = status, retry_after, rate_limited, response


def transient_error(message: str, busy: Busy | None = None) -> TransientError:
    """TransientError(message), caused by `busy` (what the server said about waiting) when there is one."""
    err = TransientError(message)
    err.__cause__ = busy
    return err


def busy_of(exc: BaseException) -> Busy | None:
    return exc.__cause__ if isinstance(exc.__cause__, Busy) else None


GiveUp = Callable[[TransientError, int], T]    # (the last failure, tries of its kind) -> a result, or raise


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


class Retrier:
    """A policy with the means to wait (`sleep`) and to say so (`log`), injected so tests record the waits."""

    def __init__(self, policy: RetryPolicy, *, sleep: Callable[[float], None] = time.sleep, log: Log | None = None):
        self.policy, self.sleep, self.log = policy, sleep, log or _stderr

    def call(self, fn: Callable[[], T], what: str, give_up: GiveUp[T] | None = None) -> T:
        """fn() until it returns. Each TransientError it raises is retried as the policy says (the Retry-After
        and rate limit of its Busy cause heeded), logged as `retry 1/3 in 2s: <what>: <error>`. When the tries
        are spent: give_up(last error, tries) when given, else TransientError `<what>: failed after N attempts:
        <last error>`."""
        tries = rate_tries = 0
        while True:
            try:
                return fn()
            except TransientError as exc:
                busy = busy_of(exc)
                if busy is not None and busy.rate_limited and self.policy.rate_attempts is not None:
                    rate_tries += 1
                    n, limit = rate_tries, self.policy.rate_attempts
                else:
                    tries += 1
                    n, limit = tries, self.policy.attempts
                if n >= limit:
                    if give_up is not None:
                        return give_up(exc, n)
                    raise TransientError(f"{what}: failed after {n} attempts: {exc}") from exc
                retry_after = busy.retry_after if busy is not None else None
                wait = self.policy.wait(n, retry_after)
                capped = f" (asked to wait {retry_after:g}s; {wait:g}s is the cap)" \
                    if retry_after is not None and retry_after > wait else ""
                self.log(f"retry {n}/{limit - 1} in {wait:g}s: {what}: {exc}{capped}")
                self.sleep(wait)


class RateLimit(NamedTuple):
    """An answer that says "rate limited": the seconds it asks to wait (None: it does not say; back off)."""

    retry_after: float | None


def resendable(body: Body | str) -> bool:
    """Whether a request body can be sent a second time (not a stream that the first attempt spent)."""
    return body is None or isinstance(body, (bytes, bytearray, str))


class RetryingClient:
    """One endpoint, one Session, the retry policy on each request: rate limits waited out (capped at
    `max_wait`, `rate_attempts` at most), 5xx answers and network errors retried `error_attempts` times
    with exponential `backoff`.

    `service` names the endpoint in messages, `unreachable_error` is raised when the network keeps failing
    and `rate_limit_error` when the rate limit outlasts the attempts (class attributes a subclass may set, or
    arguments); `secrets` are scrubbed from messages. A subclass may override `rate_limit` (which answers mean
    "rate limited").
    """

    service = "API"
    unreachable_error: type[Exception] = TransientError
    rate_limit_error: type[Exception] = TransientError

    def __init__(self, api_url: str, *, session: Session | None = None, sleep: Callable[[float], None] = time.sleep,
                 log: Log | None = None, clock: Callable[[], float] = time.time, max_wait: float = 120.0,
                 rate_attempts: int = 6, error_attempts: int = 3, backoff: float = 1.0,
                 timeout: tuple[float, float] = (10.0, 60.0), service: str | None = None,
                 unreachable_error: type[Exception] | None = None, rate_limit_error: type[Exception] | None = None,
                 secrets: Iterable[str] = ()):
        self.api_url = api_url.rstrip("/")
        self.session = session if session is not None else session_for(self.api_url)
        self.sleep, self.clock = sleep, clock
        self.log = log or _stderr
        self.max_wait, self.timeout = max_wait, timeout
        self.service = service or self.service
        self.unreachable_error = unreachable_error or self.unreachable_error
        self.rate_limit_error = rate_limit_error or self.rate_limit_error
        self.secrets: list[str] = list(secrets)
        self.policy = RetryPolicy(attempts=error_attempts, delay=backoff, factor=2.0, max_wait=max_wait,
                                  rate_attempts=rate_attempts)
        self.retrier = Retrier(self.policy, sleep=sleep, log=lambda message: self.log(self.scrub(message)))

    def scrub(self, text: str) -> str:
        """`text` without the secrets this client sends."""
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def rate_limit(self, r: Response) -> RateLimit | None:
        """Whether `r` says "rate limited", and how long it asks to wait; None: it does not."""
        if r.status_code == 429:
            return RateLimit(retry_after_seconds(r.headers.get("Retry-After"), self.clock))
        return None

    def request(self, method: str, url: str, what: str, *, headers: Mapping[str, str] | None = None,
                json_body: Any = None, data: Body | str = None, follow_redirects: bool = False) -> Response:
        """Send one request with the retries above; the last 5xx answer is returned, not raised. A body that
        cannot be sent again (a stream) is sent once: its failure is final."""
        once_only = not resendable(data)

        def once() -> Response:
            try:
                r = self.session.request(method, url, headers=dict(headers or {}), json=json_body, data=data,
                                         timeout=self.timeout, allow_redirects=follow_redirects)
            except PermanentError as exc:      # a setting or URL that cannot work: no retry helps
                raise self.unreachable_error(self.scrub(f"{what}: {exc}")) from None
            except RequestException as exc:
                raise TransientError(f"{type(exc).__name__}: {exc}") from exc
            if once_only:
                return r
            limited = self.rate_limit(r)
            if limited is not None:
                raise transient_error(f"HTTP {r.status_code} rate limited",
                                      Busy(r.status_code, limited.retry_after, rate_limited=True, response=r))
            if r.status_code >= 500:
                raise transient_error(f"HTTP {r.status_code}", Busy(r.status_code, response=r))
            return r

        def give_up(last: TransientError, tries: int) -> Response:
            busy = busy_of(last)
            if busy is not None and busy.rate_limited:
                raise self.rate_limit_error(f"{what}: {self.service} still rate limits after {tries} attempts "
                                            f"(HTTP {busy.status})") from None
            if busy is not None and busy.response is not None:
                return busy.response            # the last 5xx: the caller reports it
            raise self.unreachable_error(self.scrub(f"{what}: {self.service} unreachable after {tries} attempts: "
                                                    f"{last}")) from None

        retrier = Retrier(RetryPolicy(attempts=1), log=self.retrier.log) if once_only else self.retrier
        return retrier.call(once, what, give_up)
