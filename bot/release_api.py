"""``POST /api/v1/release``: the pipeline hook over HTTP.

The caller sends ``Authorization: Bearer <Google-signed OIDC ID token>`` (audience: the
configured ``CLUSTERBOT_OIDC_AUDIENCE``) and ``{"cluster": "train01", "then":
"scale-to-zero"|"delete", "timeout": "6h"}``; the answer is 202 with the release, or a JSON
``{"error"}`` with 400 (bad request), 401 (no valid token), 403 (a caller not named in the
policy's ``[pipelines]``, or an action it may not ask), 429 (too many releases from one
caller; ``Retry-After``) or 503 (shutting down).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

from bot.oidc import IdTokenVerifier, TokenRefused
from handlers.changes.release import CallerRefused, ReleaseError, Releases, TooManyReleases
from handlers.domain.errors import VertexError
from handlers.entities import Release
from handlers.errors import UserError

log = logging.getLogger(__name__)
DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$")
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_TIMEOUT = "6h"


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``6h``, ``2d`` in seconds; ``ReleaseError`` (a
    ``ValueError``) for anything else."""
    match = DURATION.match(text.strip().lower())
    if not match:
        raise ReleaseError(f"{text[:40]!r} is not a duration like 30m, 6h or 2d")
    return float(match.group(1)) * UNITS[match.group(2)]


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=status)


class ReleaseApi:
    def __init__(
        self,
        releases: Releases,
        accepting: Callable[[], bool],
        session: Callable[[], aiohttp.ClientSession],
        *,
        audience: str,
        certs_url: str,
    ) -> None:
        self.releases = releases
        self.accepting = accepting  # False while the service drains
        self.verifier = IdTokenVerifier(audience, certs_url, session)

    async def handle(self, request: web.Request) -> web.Response:
        releases = self.releases
        if not self.accepting():
            return _error(503, "shutting down")
        try:
            caller = await self.verifier.verify(request.headers.get("Authorization"))
        except TokenRefused as error:
            log.warning("refused a release request: %s", error)
            return _error(401, str(error))
        if releases.caller(caller.email) is None:
            log.warning("refused a release request from %s: not in [pipelines]", caller.email)
            return _error(403, f"{caller.email} is not a caller of the release hook")
        try:
            body: Any = await request.json()
        except ValueError:
            return _error(400, "the body must be JSON: {cluster, then, timeout}")
        if not isinstance(body, dict) or not isinstance(body.get("cluster"), str):
            return _error(400, "the body must name a cluster: {cluster, then, timeout}")
        try:
            wait = parse_duration(str(body.get("timeout", DEFAULT_TIMEOUT)))
            release = await releases.start(
                caller.email, body["cluster"], str(body.get("then", "")), wait
            )
        except CallerRefused as error:
            log.warning("refused a release request: %s", error)
            return _error(403, str(error))
        except TooManyReleases as error:
            response = _error(429, str(error))
            response.headers["Retry-After"] = str(max(1, math.ceil(error.retry_after)))
            return response
        except VertexError as error:
            log.warning("release by %s: the control plane failed: %s", caller.email, error)
            return _error(502, "the control plane could not be read now; try again later")
        except UserError as error:  # the one kind of error meant for the caller
            return _error(400, error.said)
        log.info("release %s of %s asked by %s", release.id, release.cluster, caller.email)
        return web.json_response(describe(release), status=202)


def describe(release: Release) -> dict[str, Any]:
    """The release as the HTTP API answers it; ``thread_ts`` is the Slack message its thread
    hangs from, where the rest is told."""
    return {
        "release": release.id,
        "cluster": release.cluster,
        "then": release.action,
        "state": str(release.state),
        "deadline": release.deadline,
        "caller": release.caller,
        "thread_ts": release.thread,
    }
