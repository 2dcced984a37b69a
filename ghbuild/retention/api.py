"""What the Docker Hub and GitHub API clients share: the bounded retries of ghbuild.http.retry with the
retention errors (network failures: PruneError; a rate limit that outlasts the attempts: PruneAbort),
secrets scrubbed from messages, pagination bounds and the default pace between deletes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ghbuild.errors import PruneAbort, PruneError
from ghbuild.http.response import Response
from ghbuild.http.retry import RetryingClient
from ghbuild.http.session import Session


class ApiClient(RetryingClient):
    """One JSON API: `pages` counts the pages listed (the result's stats), `pace` is the default number of
    seconds the delete loop waits between two deletes, `max_pages` bounds a listing."""

    unreachable_error = PruneError
    rate_limit_error = PruneAbort

    def __init__(self, api_url: str, *, session: Session | None = None, sleep: Callable[[float], None] = time.sleep,
                 pace: float = 0.5, max_pages: int = 1000, **kwargs: Any):
        super().__init__(api_url, session=session, sleep=sleep, **kwargs)
        self.pace, self.max_pages = pace, max_pages
        self.pages = 0

    def visit_page(self, url: str, seen: set[str], what: str) -> None:
        """Before a listing fetches `url`: at most `max_pages` pages, never the same page twice."""
        if len(seen) >= self.max_pages:
            raise PruneError(f"{what}: more than {self.max_pages} pages; refusing to prune from a partial list")
        if url in seen:
            raise PruneError(f"{what}: pagination loops back to {url}")
        seen.add(url)

    @staticmethod
    def message(r: Response) -> str:
        """The error message of a JSON answer (`message` or `detail`), else the start of its text."""
        try:
            body = r.json()
        except ValueError:
            return (r.text or "")[:200].strip()
        if isinstance(body, dict):
            return str(body.get("message") or body.get("detail") or "")[:200]
        return ""

