"""``clusterbot release CLUSTER --when-drained --then scale-to-zero|delete [--timeout 6h]``:
the last step of a pipeline. It asks the running service over ``POST /api/v1/release`` with a
Google-signed OIDC ID token for the service's audience, fetched with google-auth from the
step's own credentials (a Cloud Build or pipeline service account, or ADC), and prints what
the service answered. ``CLUSTERBOT_ID_TOKEN`` gives a token instead (tests, other issuers).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any


def _token(audience: str) -> str:
    given = os.environ.get("CLUSTERBOT_ID_TOKEN")
    if given:
        return given
    import google.auth.transport.requests
    from google.oauth2 import id_token

    return str(id_token.fetch_id_token(google.auth.transport.requests.Request(), audience))  # type: ignore[no-untyped-call]


def run(cluster: str, then: str, timeout: str, url: str | None, audience: str | None) -> int:
    from bot.release_api import parse_duration

    try:
        parse_duration(timeout)
    except ValueError as error:
        print(f"clusterbot release: --timeout: {error}", file=sys.stderr)
        return 2
    base = url or os.environ.get("CLUSTERBOT_URL")
    if not base:
        print(
            "clusterbot release: say where the service runs: --url https://… or CLUSTERBOT_URL",
            file=sys.stderr,
        )
        return 2
    try:
        token = _token(audience or os.environ.get("CLUSTERBOT_OIDC_AUDIENCE") or base)
    except Exception as error:  # google-auth's many ways to have no identity
        print(f"clusterbot release: no ID token could be obtained: {error}", file=sys.stderr)
        return 1
    body = json.dumps({"cluster": cluster, "then": then, "timeout": timeout}).encode()
    request = urllib.request.Request(
        base.rstrip("/") + "/api/v1/release",
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            answer: Any = json.loads(reply.read() or b"{}")
    except urllib.error.HTTPError as error:
        reason = _reason(error.read())
        print(f"clusterbot release: refused (HTTP {error.code}): {reason}", file=sys.stderr)
        return 2 if error.code in (400, 401, 404) else 1
    except (urllib.error.URLError, TimeoutError, ValueError) as error:
        print(f"clusterbot release: the service could not be reached: {error}", file=sys.stderr)
        return 1
    print(
        f"release {answer.get('release')}: {answer.get('then')} {answer.get('cluster')} once its "
        f"Slurm queue is empty ({answer.get('state')}); follow it in the alert channel"
    )
    return 0


def _reason(body: bytes) -> str:
    try:
        return str(json.loads(body).get("error", "")) or body.decode(errors="replace")[:200]
    except ValueError:
        return body.decode(errors="replace")[:200]
