"""Access tokens for the control plane: Application Default Credentials, or a static token.

google-auth's credentials are synchronous; refreshing does blocking HTTP, so it runs in a
worker thread, behind a lock so that concurrent requests share one refresh.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class TokenSource(Protocol):
    async def token(self) -> str: ...


class StaticToken:
    """A fixed bearer token, for the local simulator and tests."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token


class GoogleCredentialsToken:
    """Tokens from google-auth credentials (ADC by default), refreshed about once an hour."""

    def __init__(self, credentials: Any | None = None) -> None:
        self._credentials = credentials
        self._lock = asyncio.Lock()
        self.refreshes = 0

    def _load_default(self) -> Any:
        import google.auth

        credentials, _project = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
        return credentials

    def _refresh(self, credentials: Any) -> None:
        import google.auth.transport.requests

        credentials.refresh(google.auth.transport.requests.Request())

    async def token(self) -> str:
        credentials: Any = self._credentials
        if credentials is not None and credentials.valid:
            return str(credentials.token)
        async with self._lock:
            if self._credentials is None:
                self._credentials = await asyncio.to_thread(self._load_default)
            credentials = self._credentials
            if not credentials.valid:
                await asyncio.to_thread(self._refresh, credentials)
                self.refreshes += 1
            return str(credentials.token)
