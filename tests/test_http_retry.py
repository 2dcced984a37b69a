"""ghbuild.http.retry and ghbuild.http.origin: the one Retry-After parser and loopback check (used by
ghbuild.registry.client and the retention API clients). No server, no waiting: the clock is injected."""

from __future__ import annotations

import email.utils

import pytest

from ghbuild.http.origin import is_loopback
from ghbuild.http.retry import retry_after_seconds
from ghbuild.http.session import session_for

NOW = 1_750_000_000.0


def clock() -> float:
    return NOW


@pytest.mark.parametrize("value,expected", [
    ("0", 0.0), ("7", 7.0), (" 120 ", 120.0), ("1000", 1000.0), ("1.5", 1.5),
    (email.utils.formatdate(NOW + 30, usegmt=True), 30.0),                      # IMF-fixdate
    ("Sun, 15 Jun 2025 15:07:10 GMT", max(0.0, 1_750_000_030.0 - NOW)),         # the same date, written out
    (email.utils.formatdate(NOW - 600, usegmt=True), 0.0),                      # a date in the past: no wait
    ("soon", None), ("-1", None), ("1e3", None), ("Sun, 99 Foo 2025", None),    # garbage
    ("", None), (None, None), ("   ", None),                                   # absent
])
def test_retry_after_seconds(value, expected):
    assert retry_after_seconds(value, clock) == expected


def test_retry_after_http_date_uses_the_injected_clock():
    header = email.utils.formatdate(NOW + 90, usegmt=True)
    assert retry_after_seconds(header, lambda: NOW + 60) == 30.0
    assert retry_after_seconds(header, lambda: NOW + 200) == 0.0


@pytest.mark.parametrize("target", [
    "127.0.0.1", "127.0.0.1:5000", "127.1.2.3:80", "localhost", "localhost:5000", "LOCALHOST",
    "::1", "[::1]", "[::1]:5000",
    "http://127.0.0.1:5000", "http://localhost/v2/", "https://localhost:8443/api", "http://[::1]:8080/x",
    "::1%lo", "[::1%lo]:5000", "http://[::1%25lo]:5000/v2/", "0:0:0:0:0:0:0:1", "127.255.255.254",
])
def test_loopback(target):
    assert is_loopback(target)


@pytest.mark.parametrize("target", [
    "registry-1.docker.io", "ghcr.io:443", "10.0.0.1:5000", "128.0.0.1", "localhost.example.com",
    "[2001:db8::1]:5000", "2001:db8::1", "https://hub.docker.com", "http://127.example.com/", "",
    "127.1", "127.0.0.1.example.com", "fe80::1%eth0", "::ffff:127.0.0.1", "a\x00b",
])
def test_not_loopback(target):
    assert not is_loopback(target)


def test_loopback_sessions_ignore_proxy_settings():
    assert session_for("http://127.0.0.1:5000").trust_env is False
    assert session_for("[::1]:5000").trust_env is False
    assert session_for("https://api.github.com").trust_env is True
