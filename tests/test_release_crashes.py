"""Kill `clusterbot serve` at each step of a pipeline release's action, restart it, and check
that the release is finished, not lost: one request, one PATCH, the release acted, and no
cluster left blocked. On SQLite and on PostgreSQL.

The process ends itself at a named step (CLUSTERBOT_DEBUG_CRASH_AT: ``os._exit``, no clean
up). The ID token is signed by a local key whose certificate is served on loopback, as
Google serves its own.
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from bot.jobs import CRASH_EXIT
from tests.support.postgres import query
from tests.support.processes import replica, sandbox, wait_until
from tests.support.steps import steps_of
from tests.test_crash_points import database
from tests.test_release import AUDIENCE, BUILD, KID, Issuer

POINTS = steps_of("release")  # found in the code: tests/support/steps.py
POLICY = f"""
[roles]
operator = ["U0ALICE"]
approver = ["U0BOB"]
[pipelines]
"{BUILD}" = ["scale-to-zero"]
"""


@contextmanager
def certs_served(issuer: Issuer) -> Iterator[str]:
    """The issuer's certificate at a loopback URL, as https://www.googleapis.com/oauth2/v1/certs
    serves Google's (key id -> PEM), for processes other than this one."""
    pem = issuer.cert.public_bytes(serialization.Encoding.PEM).decode()
    body = json.dumps({KID: pem}).encode()

    class Certs(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "public, max-age=3600")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Certs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/certs"
    finally:
        server.shutdown()
        server.server_close()


def ask_release(url: str, token: str) -> dict[str, object]:
    body = json.dumps({"cluster": "cpu01", "then": "scale-to-zero", "timeout": "1h"}).encode()
    request = urllib.request.Request(
        f"{url}/api/v1/release",
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        assert reply.status == 202
        answer: dict[str, object] = json.loads(reply.read())
        return answer


def acted(url: str) -> bool:
    """Lasting state: the release acted, and its request (the last one made) succeeded."""
    releases = query(url, "SELECT state, request_id FROM releases")
    if len(releases) != 1 or releases[0][0] != "acted":
        return False
    states = query(url, f"SELECT state FROM approval_requests WHERE id = '{releases[0][1]}'")
    return states == [("succeeded",)]


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_step_of_a_release_loses_nothing(
    point: str, kind: str, tmp_path: Path
) -> None:
    issuer = Issuer()
    policy = tmp_path / "pipelines.toml"
    policy.write_text(POLICY)
    with sandbox(tmp_path) as box, database(kind, tmp_path) as url, certs_served(issuer) as certs:
        box.simulator("config", {"durations": {"update": 1}})
        box.simulator("jobs", {"cluster": "cpu01", "jobs": []})  # the pipeline's jobs ended
        one = replica(
            tmp_path,
            box,
            "one",
            url,
            CLUSTERBOT_POLICY_FILE=str(policy),
            CLUSTERBOT_OIDC_AUDIENCE=AUDIENCE,
            CLUSTERBOT_OIDC_CERTS_URL=certs,
            CLUSTERBOT_RELEASE_CHECK_SECONDS="0.3",
            CLUSTERBOT_RELEASE_GRACE_SECONDS="0",
            CLUSTERBOT_DEBUG_CRASH_AT=point,
        )
        box.point_at(one.events)
        try:
            one.start()
            ask_release(one.url, issuer.token())
            assert one.wait_exit(limit=60) == CRASH_EXIT, one.log.read_text()[-2000:]
            assert f"exiting at {point}" in one.log.read_text()
            one.env.pop("CLUSTERBOT_DEBUG_CRASH_AT")
            one.start()  # the same replica, restarted: it finishes what the release began
            wait_until(lambda: acted(url), limit=120, what=f"the release to act after {point}")
        finally:
            one.stop()
        assert len(box.requests("PATCH")) == 1  # sent once, whatever died
        states = sorted(s for (s,) in query(url, "SELECT state FROM approval_requests"))
        # one request, whatever step was cut off: a card cut off is owed, and posted once
        assert states == ["succeeded"]
