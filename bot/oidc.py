"""Google-signed OIDC ID tokens, as Cloud Build, Cloud Scheduler and pipeline service accounts
send them (``Authorization: Bearer …``), verified with google-auth.

The signing certificates are fetched from the certs URL (Google's
``https://www.googleapis.com/oauth2/v1/certs``: key id -> PEM certificate) over the service's
own HTTP session and kept for as long as its ``Cache-Control: max-age`` allows; the token is
then checked by ``google.auth.jwt.decode``: signature, expiry, audience. The issuer must be
Google's and the email verified, as ``google.oauth2.id_token.verify_oauth2_token`` requires.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

GOOGLE_ISSUERS = ("accounts.google.com", "https://accounts.google.com")
SKEW = 10  # seconds of clock difference allowed, as google-auth's verify_token takes
CERTS_TIMEOUT = aiohttp.ClientTimeout(total=10)  # the whole fetch of the certificates


class TokenRefused(Exception):
    """The token cannot be accepted; the message says why, without the token."""


@dataclass(frozen=True)
class Principal:
    """Who called: the verified email of the token (a service account's, for a pipeline)."""

    email: str
    subject: str


class IdTokenVerifier:
    def __init__(
        self,
        audience: str,
        certs_url: str,
        session: Callable[[], aiohttp.ClientSession],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.audience = audience
        self.certs_url = certs_url
        self.session = session
        self.clock = clock
        self._certs: dict[str, str] = {}
        self._fresh_until = 0.0
        self._fetch: asyncio.Future[dict[str, str]] | None = None

    async def certs(self) -> dict[str, str]:
        """The signing certificates, fetched once for every caller waiting on them: a slow
        certs URL holds each caller at most ``CERTS_TIMEOUT``, and costs one fetch."""
        if self._certs and self.clock() < self._fresh_until:
            return self._certs
        if self._fetch is None or self._fetch.done():
            self._fetch = asyncio.ensure_future(self._load())
        return await asyncio.shield(self._fetch)  # a caller that gives up leaves it running

    async def _load(self) -> dict[str, str]:
        try:
            async with self.session().get(self.certs_url, timeout=CERTS_TIMEOUT) as reply:
                if reply.status != 200:
                    raise TokenRefused(
                        f"the signing keys could not be fetched (HTTP {reply.status})"
                    )
                document = await reply.json(content_type=None)
                control = reply.headers.get("Cache-Control", "")
        except TimeoutError:
            raise TokenRefused("the signing keys could not be fetched in time") from None
        except (aiohttp.ClientError, ValueError) as error:
            raise TokenRefused(f"the signing keys could not be fetched ({error})") from error
        if not isinstance(document, dict) or not all(isinstance(v, str) for v in document.values()):
            raise TokenRefused("the signing keys are not a key id -> certificate map")
        age = re.search(r"max-age=(\d+)", control)
        self._certs = dict(document)
        self._fresh_until = self.clock() + (int(age.group(1)) if age else 300)
        return self._certs

    async def verify(self, header: str | None) -> Principal:
        """The caller of a request with this ``Authorization`` header; ``TokenRefused`` when
        it carries no valid Google ID token for this service."""
        from google.auth import exceptions, jwt

        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise TokenRefused("no bearer token: send a Google-signed OIDC ID token")
        certs = await self.certs()
        try:
            claims: dict[str, Any] = jwt.decode(  # type: ignore[no-untyped-call]
                token.strip(), certs=certs, audience=self.audience, clock_skew_in_seconds=SKEW
            )
        except (ValueError, exceptions.GoogleAuthError) as error:
            raise TokenRefused(f"the ID token is not valid: {error}") from None
        if claims.get("iss") not in GOOGLE_ISSUERS:
            raise TokenRefused("the ID token was not issued by Google")
        email = claims.get("email")
        if not isinstance(email, str) or claims.get("email_verified") is not True:
            raise TokenRefused("the ID token carries no verified email")
        return Principal(email=email, subject=str(claims.get("sub", "")))
