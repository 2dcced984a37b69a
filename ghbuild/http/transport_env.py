"""What the environment says about a connection: the TLS context to verify the server with, and the proxy to
go through.

- TLS: verified against the system's CA store (the defaults of `ssl`, which honour SSL_CERT_FILE and
  SSL_CERT_DIR), a bundle named by `verify=` or by REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE, or certifi's bundle
  when the system has none;
- proxies: http_proxy, https_proxy, all_proxy and no_proxy, either case, read as urllib and curl read them;
  only http:// proxy URLs (https targets are tunnelled through them with CONNECT).
"""

from __future__ import annotations

import base64
import ipaddress
import os
import ssl
import threading
from collections.abc import Mapping
from urllib.parse import SplitResult, unquote, urlsplit

from ghbuild.http.errors import InvalidURL, UnusableSetting
from ghbuild.http.origin import port_of

# --------------------------------------------------------------------------- TLS

_contexts: dict[bool | str, ssl.SSLContext] = {}
_contexts_lock = threading.Lock()


def _certifi_bundle() -> str | None:
    try:
        import certifi  # optional: only where the system has no CA store
    except ImportError:
        return None
    return certifi.where()


def _system_store_present() -> bool:
    paths = ssl.get_default_verify_paths()
    if paths.cafile and os.path.isfile(paths.cafile):
        return True
    return bool(paths.capath and os.path.isdir(paths.capath) and os.listdir(paths.capath))


def tls_context(verify: bool | str) -> ssl.SSLContext:
    """The ssl context for `verify`: False (no verification), True (the system store; certifi's bundle when
    the system has none) or the path of a CA bundle file or a hashed directory. Built once per value."""
    verify = verify if isinstance(verify, str) else bool(verify)   # 0 and False: one key, one meaning
    with _contexts_lock:
        if verify in _contexts:
            return _contexts[verify]
        try:
            ctx = _new_context(verify)
        except (ssl.SSLError, OSError) as exc:
            raise UnusableSetting(f"CA bundle {verify}: no certificate could be read from it ({exc})") from None
        _contexts[verify] = ctx
        return ctx


def _new_context(verify: bool | str) -> ssl.SSLContext:
    if verify is False:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif isinstance(verify, str):
        if os.path.isdir(verify):
            ctx = ssl.create_default_context(capath=verify)
        elif os.path.isfile(verify):
            ctx = ssl.create_default_context(cafile=verify)
        else:
            raise UnusableSetting(f"CA bundle {verify}: no such file or directory")
    elif _system_store_present():
        ctx = ssl.create_default_context()
    else:
        bundle = _certifi_bundle()
        ctx = ssl.create_default_context(cafile=bundle) if bundle else ssl.create_default_context()
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def env_ca_bundle(env: Mapping[str, str]) -> str | None:
    """The bundle `requests` would have used from the environment (instead of the system store, as there)."""
    return env.get("REQUESTS_CA_BUNDLE") or env.get("CURL_CA_BUNDLE") or None


# --------------------------------------------------------------------------- proxies


def env_proxy(env: Mapping[str, str], scheme: str) -> str | None:
    for name in (f"{scheme}_proxy", "all_proxy"):
        # As urllib reads them: the lower-case variable wins when it is set, even empty (then the upper-case
        # one is ignored and all_proxy is asked next).
        value = env[name] if name in env else env.get(name.upper())
        if value and value.strip():
            return value.strip()
    return None


def _in_network(host: str, network: str) -> bool:
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(network, strict=False)
    except ValueError:
        return False


def no_proxy_matches(host: str, port: int, no_proxy: str) -> bool:
    """no_proxy as curl and requests read it: `*`, host names matched as the name or a parent domain
    (`example.com` and `.example.com` both match `reg.example.com`, never `badexample.com`), IP addresses,
    CIDR ranges, each optionally with `:port`."""
    host = host.lower().strip("[]")
    for entry in no_proxy.replace(" ", ",").split(","):
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        name, want_port = entry, None
        if entry.startswith("["):                       # [::1]:5000
            name, _, rest = entry[1:].partition("]")
            want_port = rest[1:] if rest.startswith(":") else None
        elif entry.count(":") == 1:
            name, want_port = entry.split(":")
        if want_port and want_port != str(port):
            continue
        if "/" in name:
            if _in_network(host, name):
                return True
            continue
        name = name.lstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


class Proxy:
    """An http:// proxy: where it listens and the Proxy-Authorization its URL's credentials make."""

    __slots__ = ("host", "port", "authorization")

    def __init__(self, url: str):
        try:
            parts = urlsplit(url if "://" in url else "http://" + url)
        except ValueError:
            raise UnusableSetting("a proxy URL in the environment is not a URL") from None
        if parts.scheme != "http":
            raise UnusableSetting(f"proxy {parts.scheme}://{parts.hostname}: only http:// proxy URLs are supported "
                                  "(https targets are tunnelled through them with CONNECT)")
        if not parts.hostname:
            raise UnusableSetting("proxy URL without a host in the environment")
        self.host: str = parts.hostname
        try:
            self.port = port_of(parts, f"proxy {parts.hostname}")
        except InvalidURL as exc:
            raise UnusableSetting(str(exc)) from None
        self.authorization: str | None = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self.authorization = "Basic " + base64.b64encode(pair).decode()


def proxy_for(url_parts: SplitResult, env: Mapping[str, str]) -> Proxy | None:
    """The proxy a request to these URL parts goes through, from the environment; None for a direct one."""
    value = env_proxy(env, url_parts.scheme)
    if not value:
        return None
    no_proxy = env["no_proxy"] if "no_proxy" in env else env.get("NO_PROXY", "")
    port = port_of(url_parts, url_parts.hostname or "")
    if no_proxy and no_proxy_matches(url_parts.hostname or "", port, no_proxy):
        return None
    return Proxy(value)
