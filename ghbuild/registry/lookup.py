"""A reference's digest through a registry client factory: what the base identity and the helper pin ask."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ghbuild import naming

RegistryFactory = Callable[[str], Any]   # host -> ghbuild.registry.client.Registry


def registry_lookup(factory: RegistryFactory) -> Callable[[str], str | None]:
    """ref -> its digest, None when the registry confirms it missing (raises when it cannot tell)."""
    def lookup(ref: str) -> str | None:
        host, repo, tag = naming.split_reference(ref)
        desc = factory(host).resolve(repo, tag)
        return desc.digest if desc is not None else None
    return lookup
