"""Registry reads side by side: a repository of thousands of tags is thousands of round trips, each short.

`Readers` runs `read(client, key)` for many keys on up to `size` clients of one registry at once (each a
`clone()` of the first, since an HTTP session serves one thread; each heeds 429 and Retry-After through its
own retry policy), returning the results in the order of the keys. Clients are kept between calls, so a token
is fetched once per client, not per round.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, Protocol, Self, TypeVar

T = TypeVar("T")
K = TypeVar("K")
DEFAULT_READERS = 8


class Cloneable(Protocol):
    def clone(self) -> Self: ...


C = TypeVar("C", bound=Cloneable)


class Readers(Generic[C]):
    """Up to `size` reads at once on clones of `client`; `size` 1 (or a single key) reads in this thread."""

    def __init__(self, client: C, size: int = DEFAULT_READERS):
        self.client, self.size = client, size
        self._idle: queue.SimpleQueue[C] = queue.SimpleQueue()

    def map(self, read: Callable[[C, K], T], keys: Sequence[K]) -> list[T]:
        """read(client, key) for every key, in the order of `keys`. The first error is raised once every read
        has ended, so a caller never goes on with part of the answers."""
        if self.size <= 1 or len(keys) <= 1:
            return [read(self.client, key) for key in keys]

        def borrowed(key: K) -> T:
            try:
                client = self._idle.get_nowait()
            except queue.Empty:
                client = self.client.clone()
            try:
                return read(client, key)
            finally:
                self._idle.put(client)

        with ThreadPoolExecutor(max_workers=min(self.size, len(keys)), thread_name_prefix="ghbuild-read") as pool:
            return list(pool.map(borrowed, keys))
