"""Tokens from real google-auth credentials: refreshed in a thread, once for concurrent callers."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from google.oauth2.credentials import Credentials

from bot.vertex.auth import GoogleCredentialsToken, StaticToken


class RefreshCounter:
    """A google-auth refresh handler: issues a new token valid for an hour, counting calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.threads: set[str] = set()

    def __call__(self, request: Any, scopes: Any) -> tuple[str, datetime]:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        expiry = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)
        return f"ya29.token-{self.calls}", expiry


async def test_concurrent_callers_share_one_refresh() -> None:
    handler = RefreshCounter()
    credentials = Credentials(token=None, refresh_handler=handler)
    source = GoogleCredentialsToken(credentials)
    tokens = await asyncio.gather(*(source.token() for _ in range(25)))
    assert set(tokens) == {"ya29.token-1"}
    assert handler.calls == 1 and source.refreshes == 1
    assert threading.main_thread().name not in handler.threads  # refreshed off the event loop


async def test_expired_token_is_refreshed() -> None:
    handler = RefreshCounter()
    expired = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=1)
    credentials = Credentials(token="ya29.old", expiry=expired, refresh_handler=handler)
    source = GoogleCredentialsToken(credentials)
    assert await source.token() == "ya29.token-1"
    assert await source.token() == "ya29.token-1"
    assert handler.calls == 1


async def test_static_token() -> None:
    assert await StaticToken("sim").token() == "sim"
