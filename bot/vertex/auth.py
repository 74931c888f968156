"""Access tokens for the control plane: Application Default Credentials, or a static token.

google-auth's credentials are synchronous; refreshing does blocking HTTP, so it runs in a
worker thread, behind a lock so that concurrent requests share one refresh. Every failure to
get a token becomes a ``CredentialsError`` that says in plain words what is missing.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from handlers.domain.errors import CredentialsError, scrub

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
ADC_HINT = (
    "set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, attach a service "
    "account to the machine, or run `gcloud auth application-default login`"
)


class TokenSource(Protocol):
    async def token(self) -> str: ...


class StaticToken:
    """A fixed bearer token, for the local simulator and tests."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token


def _explain(error: Exception) -> CredentialsError:
    """A google-auth failure in words a person can act on (no secrets, no traceback)."""
    kind = type(error).__name__
    text = scrub(str(error), limit=200)
    if kind == "DefaultCredentialsError":
        return CredentialsError(f"no Application Default Credentials were found ({ADC_HINT})")
    if kind == "RefreshError":
        return CredentialsError(f"the credentials were refused when refreshed: {text}")
    if kind == "TransportError":
        return CredentialsError(f"Google's token service could not be reached: {text}")
    return CredentialsError(f"{kind}: {text}")


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
            try:
                if self._credentials is None:
                    self._credentials = await asyncio.to_thread(self._load_default)
                credentials = self._credentials
                if not credentials.valid:
                    await asyncio.to_thread(self._refresh, credentials)
                    self.refreshes += 1
            except Exception as error:  # google-auth raises its own types; each is explained
                raise _explain(error) from error
            return str(credentials.token)


def token_source(static: str | None) -> TokenSource:
    """A fixed token when one is configured (for a simulator), else Application Default
    Credentials: the one choice every caller of the control plane and Secret Manager makes."""
    return StaticToken(static) if static else GoogleCredentialsToken()
