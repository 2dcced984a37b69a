"""The one retry policy (ghbuild.http.retry) on recorded HTTP exchanges (tests/exchanges/), through both of its
users: the registry client (Retrier around a whole operation) and RetryingClient (one request at a time, the
Docker Hub and GitHub API clients). Waits are recorded, never slept."""

from __future__ import annotations

import email.utils
import time

import pytest
from fakes.replay import load, parse, replaying

from ghbuild.errors import TransientError
from ghbuild.http.retry import RetryingClient
from ghbuild.registry.client import Registry

HEAD_V1 = "HEAD https://registry.example.com/v2/team/app/manifests/v1"
API = "https://hub.example.com/v2/repositories/acme/app/tags"


def registry(**kwargs) -> tuple[Registry, list[float], list[str]]:
    waits: list[float] = []
    logged: list[str] = []
    return Registry("registry.example.com", sleep=waits.append, log=logged.append, **kwargs), waits, logged


def test_the_registry_waits_what_retry_after_asks_in_seconds_and_as_a_date():
    # The HTTP-date is 30 s after now (whole seconds: the wait is between 29 and 30 s).
    reg, waits, logged = registry(attempts=4, delay=2.0)
    wire = replaying(reg.session, load("retry.http", RETRY_DATE=email.utils.formatdate(time.time() + 30,
                                                                                       usegmt=True)))
    found = reg.resolve("team/app", "v1")
    wire.done()
    assert found is not None and found.size == 428
    assert waits[0] == 7.0 and 28.0 < waits[1] <= 30.0 and waits[2] == 2.0   # seconds, a date, the plain delay
    assert logged[0].startswith("retry 1/3 in 7s: resolve registry.example.com/team/app:v1: HEAD team/app:v1: "
                                "HTTP 429")


def test_the_registry_gives_up_after_its_attempts_with_the_last_error():
    reg, waits, _ = registry(attempts=3, delay=2.0)
    unavailable = f"> {HEAD_V1}\n< HTTP/1.1 503 Service Unavailable"
    wire = replaying(reg.session, parse("\n---\n".join([unavailable] * 3)))
    with pytest.raises(TransientError, match=r"^resolve registry.example.com/team/app:v1: failed after 3 attempts: "
                                             r"HEAD team/app:v1: HTTP 503$"):
        reg.resolve("team/app", "v1")
    wire.done()
    assert waits == [2.0, 2.0]


@pytest.mark.parametrize(("first", "waits", "said"), [
    ("< HTTP/1.1 429 Too Many Requests\n< Retry-After: 3600", [120.0], "(asked to wait 3600s; 120s is the cap)"),
    ("! HTTPConnectionError", [1.0], "HTTPConnectionError (replayed)"),
], ids=["retry-after-capped", "broken-connection"])
def test_a_capped_retry_after_and_a_broken_connection_are_retried(first, waits, said):
    reg, slept, logged = registry(attempts=2, delay=1.0)
    wire = replaying(reg.session, parse(f"> {HEAD_V1}\n{first}\n---\n> {HEAD_V1}\n< HTTP/1.1 404 Not Found"))
    assert reg.resolve("team/app", "v1") is None
    wire.done()
    assert slept == waits
    assert said in logged[0]


def client(**kwargs) -> tuple[RetryingClient, list[float]]:
    waits: list[float] = []
    api = RetryingClient("https://hub.example.com", sleep=waits.append, log=lambda message: None,
                         service="Docker Hub", **kwargs)
    return api, waits


def answers(*statuses: str, method: str = "GET") -> str:
    return "\n---\n".join(f"> {method} {API}\n< HTTP/1.1 {status}\n<\n< {{}}" for status in statuses)


def test_an_api_client_retries_a_503_then_returns_the_answer_with_exponential_backoff():
    api, waits = client(error_attempts=3, backoff=1.0)
    wire = replaying(api.session, parse(answers("503 Service Unavailable", "502 Bad Gateway", "200 OK")))
    assert api.request("GET", API, "list tags").status_code == 200
    wire.done()
    assert waits == [1.0, 2.0]


def test_an_api_client_returns_the_last_5xx_when_the_attempts_are_spent():
    api, waits = client(error_attempts=2)
    wire = replaying(api.session, parse(answers("500 Internal Server Error", "503 Service Unavailable")))
    assert api.request("GET", API, "list tags").status_code == 503      # the caller reports it
    wire.done()
    assert len(waits) == 1


def test_rate_limits_are_counted_apart_from_errors():
    api, waits = client(error_attempts=2, rate_attempts=4)
    wire = replaying(api.session, parse(answers("429 Too Many Requests", "429 Too Many Requests",
                                                "500 Internal Server Error", "429 Too Many Requests", "200 OK")))
    assert api.request("GET", API, "list tags").status_code == 200      # 3 rate limits and 1 error: within both
    wire.done()
    assert len(waits) == 4


def test_a_rate_limit_that_outlasts_the_attempts_is_the_rate_limit_error():
    class HubRateLimited(Exception):
        pass

    api, _ = client(rate_attempts=2, rate_limit_error=HubRateLimited)
    wire = replaying(api.session, parse(answers("429 Too Many Requests", "429 Too Many Requests")))
    limited = r"^list tags: Docker Hub still rate limits after 2 attempts \(HTTP 429\)$"
    with pytest.raises(HubRateLimited, match=limited):
        api.request("GET", API, "list tags")
    wire.done()


def test_a_body_that_cannot_be_sent_again_is_sent_once():
    api, waits = client(error_attempts=3)
    wire = replaying(api.session, parse(answers("503 Service Unavailable", method="PUT")))
    r = api.request("PUT", API, "upload", data=(chunk for chunk in [b"a", b"b"]))
    wire.done()
    assert r.status_code == 503 and waits == []
    assert wire.sent[0].body == b"ab"


def test_a_network_failure_that_lasts_is_the_unreachable_error_without_the_secret():
    api, waits = client(error_attempts=2, secrets=["hub-token"])
    broken = f"> GET {API}?token=hub-token\n! HTTPConnectionError"
    wire = replaying(api.session, parse(f"{broken}\n---\n{broken}"))
    with pytest.raises(TransientError, match=r"Docker Hub unreachable after 2 attempts") as caught:
        api.request("GET", API + "?token=hub-token", "list tags")
    wire.done()
    assert "hub-token" not in str(caught.value) and len(waits) == 1
