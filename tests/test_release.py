"""The pipeline hook: `POST /api/v1/release` with a Google-signed OIDC ID token (signed here
with a local key, its certificate served on loopback as Google serves its certs), the wait for
an empty Slurm queue, the policy's pre-approved callers, cancellation by a job that arrives
first, the timeout, and `clusterbot release` asking the service."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt

from bot.cli import main
from bot.oidc import IdTokenVerifier, TokenRefused
from handlers.domain.models import Cluster
from handlers.policy import Policy
from tests.support.demo_stack import SIDE01, TRAIN01, Stack, demo_stack, text_of
from tests.support.ports import free_port

AUDIENCE = "https://clusterbot.example.test"
BUILD = "build@demo-project.iam.gserviceaccount.com"  # pre-approved to scale to zero
OTHER = "nightly@ci-project.iam.gserviceaccount.com"  # by pattern: may only ask to delete
STRANGER = "someone@gmail.com"  # Google signs tokens for anyone: not in [pipelines]
KID = "test-key-1"


class Issuer:
    """A private key and its certificate, served at ``certs_url`` as Google serves its own
    (https://www.googleapis.com/oauth2/v1/certs: key id -> PEM certificate)."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-issuer")])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(1)
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .sign(self.key, hashes.SHA256())
        )
        pem = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        self.signer = crypt.RSASigner.from_string(pem, key_id=KID)
        self.fetches = 0

    async def certs(self, request: web.Request) -> web.Response:
        self.fetches += 1
        pem = self.cert.public_bytes(serialization.Encoding.PEM).decode()
        return web.json_response({KID: pem}, headers={"Cache-Control": "public, max-age=3600"})

    def token(self, email: str = BUILD, **claims: Any) -> str:
        now = int(time.time())
        payload = {
            "iss": "https://accounts.google.com",
            "aud": AUDIENCE,
            "sub": "1234567890",
            "email": email,
            "email_verified": True,
            "iat": now,
            "exp": now + 3600,
            **claims,
        }
        return jwt.encode(self.signer, payload).decode()


@pytest.fixture
async def issuer() -> AsyncIterator[tuple[Issuer, str]]:
    found = Issuer()
    app = web.Application()
    app.router.add_get("/oauth2/v1/certs", found.certs)
    server = TestServer(app, host="127.0.0.1", port=free_port())
    await server.start_server()
    try:
        yield found, f"http://127.0.0.1:{server.port}/oauth2/v1/certs"
    finally:
        await server.close()


def pipeline_stack(tmp: Path, certs_url: str, grace: float = 0.0) -> Any:
    policy = Policy.model_validate(
        {
            "roles": {"operator": ["U0ALICE"], "approver": ["U0BOB"]},
            "pipelines": {
                BUILD: {"pre_approved": ["scale-to-zero"], "ask": ["delete"]},
                "*@ci-project.iam.gserviceaccount.com": {"ask": ["delete"]},
            },
        }
    )
    return demo_stack(
        tmp,
        policy=policy,
        oidc_audience=AUDIENCE,
        oidc_certs_url=certs_url,
        release_check_seconds=0.2,
        release_grace_seconds=grace,
        sweep_interval=3600,
    )


async def release(stack: Stack, token: str | None, **body: Any) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with stack.session.post(
        f"{stack.url}/api/v1/release", json=body, headers=headers
    ) as reply:
        return reply.status, await reply.json()


async def _more(count: Any, than: int) -> bool:
    return bool(await count() >= than)


def thread_texts(messages: list[dict[str, Any]], ts: str) -> str:
    return "\n".join(text_of(m) for m in messages if m.get("thread_ts") == ts)


async def test_a_pre_approved_pipeline_scales_to_zero_once_the_queue_drains(
    tmp_path: Path, issuer: tuple[Issuer, str]
) -> None:
    keys, certs_url = issuer
    async with pipeline_stack(tmp_path, certs_url) as stack:
        status, answer = await release(
            stack, keys.token(), cluster="train01", then="scale-to-zero", timeout="1h"
        )
        assert status == 202, answer
        assert answer["state"] == "waiting" and answer["caller"] == BUILD
        ts = answer["thread_ts"]
        announced = next(m for m in await stack.messages() if m["ts"] == ts)
        assert "asks to scale to zero *train01* once its Slurm queue is empty" in text_of(announced)
        assert "pre-approved for it by the policy" in text_of(announced)

        # train01 still runs jobs: the checks read its queue, and the release waits
        async def checks() -> int:
            calls = await stack.requests("POST")
            return sum(1 for c in calls if c["path"].endswith("/train01:callSlurmRestApi"))

        seen = await checks()
        await stack.wait_for(lambda: _more(checks, seen + 2))
        assert "the Slurm queue is empty" not in thread_texts(await stack.messages(), ts)
        stack.simulator.set_jobs("train01", {"jobs": []})  # the pipeline's last job ended
        messages = await stack.wait(
            lambda ms: "pre-approved; sent" in thread_texts(ms, ts), limit=20
        )
        await stack.wait(
            lambda ms: any(
                "Done" in text_of(m) and "Resize request: train01" in text_of(m) for m in ms
            ),
            limit=20,
        )
        [patch] = await stack.requests("PATCH")
        a4 = Cluster.model_validate(stack.simulator.clusters[TRAIN01]).pool("a4")
        assert a4 is not None and (a4.min_nodes, a4.max_nodes) == (0, 0)
        card = next(m for m in messages if "Resize request: train01" in text_of(m))
        assert f"*pipeline:{BUILD}* asks to resize *train01*" in text_of(card)
        audit = text_of(await stack.reply_to("carol", "/cluster audit train01"))
        assert BUILD in audit
        assert keys.fetches == 1  # the certificates are kept while they are fresh
        assert patch["query"] == {"updateMask": "node_pools"}


async def test_a_job_arriving_first_cancels_and_others_need_an_approver(
    tmp_path: Path, issuer: tuple[Issuer, str]
) -> None:
    keys, certs_url = issuer
    async with pipeline_stack(tmp_path, certs_url, grace=3600) as stack:
        stack.simulator.set_jobs("train01", {"jobs": []})
        status, answer = await release(stack, keys.token(), cluster="train01", then="delete")
        assert status == 202, answer
        ts = answer["thread_ts"]
        await stack.wait(lambda ms: "the Slurm queue is empty" in thread_texts(ms, ts))
        stack.simulator.set_jobs("train01", {"running": 1})  # a new job, before the action
        await stack.wait(lambda ms: "cancelled: a job arrived first" in thread_texts(ms, ts))
        assert await stack.requests("DELETE") == []

    async with pipeline_stack(tmp_path / "again", certs_url) as stack:
        stack.simulator.set_jobs("cpu01", {"jobs": []})
        status, answer = await release(stack, keys.token(OTHER), cluster="cpu01", then="delete")
        assert status == 202, answer
        ts = answer["thread_ts"]
        await stack.wait(lambda ms: "it waits for an approver" in thread_texts(ms, ts))
        card = next(m for m in await stack.messages() if "Delete request: cpu01" in text_of(m))
        assert "Approve" in text_of(card)  # a card, like any change
        assert await stack.requests("DELETE") == []


async def test_a_queue_that_never_empties_times_out(
    tmp_path: Path, issuer: tuple[Issuer, str]
) -> None:
    keys, certs_url = issuer
    async with pipeline_stack(tmp_path, certs_url) as stack:
        status, answer = await release(
            stack, keys.token(), cluster="train01", then="scale-to-zero", timeout="1s"
        )
        assert status == 202, answer
        ts = answer["thread_ts"]
        await stack.wait(lambda ms: "timed out after 1 s" in thread_texts(ms, ts))
        assert await stack.requests("PATCH") == []


async def test_callers_without_a_valid_token_are_refused(
    tmp_path: Path, issuer: tuple[Issuer, str]
) -> None:
    keys, certs_url = issuer
    forged = Issuer()  # a key Google never published
    async with pipeline_stack(tmp_path, certs_url) as stack:
        body = {"cluster": "train01", "then": "delete"}
        refusals = {
            None: "no bearer token",
            "not-a-jwt": "the ID token is not valid",
            forged.token(): "the ID token is not valid",
            keys.token(aud="https://someone-else.test"): "the ID token is not valid",
            keys.token(exp=int(time.time()) - 3600): "the ID token is not valid",
            keys.token(iss="https://evil.example"): "not issued by Google",
            keys.token(email_verified=False): "no verified email",
        }
        for token, words in refusals.items():
            status, answer = await release(stack, token, **body)
            assert status == 401 and words in answer["error"], (token, answer)
        for bad, words in {
            "then": ({"cluster": "train01", "then": "explode"}, "scale-to-zero or delete"),
            "cluster": ({"cluster": "nope01", "then": "delete"}, "'nope01' is not one cluster"),
            "timeout": ({"cluster": "train01", "then": "delete", "timeout": "soon"}, "duration"),
        }.values():
            status, answer = await release(stack, keys.token(), **bad)
            assert status == 400 and words in answer["error"], (bad, answer)
        assert await stack.requests("PATCH") == [] and await stack.requests("DELETE") == []


async def test_the_command_line_asks_the_service(
    tmp_path: Path,
    issuer: tuple[Issuer, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    keys, certs_url = issuer
    async with pipeline_stack(tmp_path, certs_url) as stack:
        monkeypatch.setenv("CLUSTERBOT_ID_TOKEN", keys.token())
        args = ["release", "cpu01", "--when-drained", "--then", "scale-to-zero", "--url", stack.url]
        assert await asyncio.to_thread(main, args) == 0
        out = capsys.readouterr().out
        assert "scale-to-zero" in out and "/cpu01 once its Slurm queue is empty (waiting)" in out
        monkeypatch.setenv("CLUSTERBOT_ID_TOKEN", "forged")
        assert await asyncio.to_thread(main, args) == 2
        assert "refused (HTTP 401): the ID token is not valid" in capsys.readouterr().err
        assert await asyncio.to_thread(main, [*args[:5], "--timeout", "later"]) == 2


async def test_only_named_callers_are_heard_and_answers_reveal_nothing(
    tmp_path: Path, issuer: tuple[Issuer, str]
) -> None:
    keys, certs_url = issuer
    async with pipeline_stack(tmp_path, certs_url) as stack:
        before = len(await stack.messages())
        for token, body, words in (
            (keys.token(STRANGER), {"cluster": "train01", "then": "delete"}, "not a caller"),
            (keys.token(STRANGER), {"nonsense": True}, "not a caller"),
            (keys.token(OTHER), {"cluster": "cpu01", "then": "scale-to-zero"}, "may not ask"),
        ):
            status, answer = await release(stack, token, **body)
            assert status == 403 and words in answer["error"], answer
        await stack.session.delete(f"{stack.url}/vertex/_sim/requests")
        for cluster in ("trian01", SIDE01):  # a near miss, and a cluster outside the targets
            status, answer = await release(stack, keys.token(), cluster=cluster, then="delete")
            assert status == 400, answer
            for secret in ("demo-project/", "did you mean", "train01", "manages and can"):
                assert (secret in answer["error"]) == (secret == "manages and can"), answer
        assert [r["path"] for r in await stack.requests() if "other-project" in r["path"]] == []
        assert await stack.service.store.open_releases() == []
        assert len(await stack.messages()) == before  # nothing announced


async def test_a_caller_looping_on_the_hook_is_told_to_wait(
    tmp_path: Path, issuer: tuple[Issuer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    keys, certs_url = issuer
    monkeypatch.setattr("handlers.changes.release.RATE_LIMIT", 3)
    async with pipeline_stack(tmp_path, certs_url) as stack:
        body = {"cluster": "train01", "then": "scale-to-zero", "timeout": "1h"}
        answers = [await release(stack, keys.token(), **body) for _ in range(5)]
        assert [status for status, _ in answers] == [202, 202, 202, 429, 429]
        assert "asked for 3 releases in 1 h" in answers[3][1]["error"]
        assert len(await stack.service.store.open_releases()) == 3
        status, _ = await release(stack, keys.token(OTHER), cluster="cpu01", then="delete")
        assert status == 202  # another caller is not held back


async def test_a_hanging_certs_url_costs_one_fetch_and_a_bounded_wait(
    issuer: tuple[Issuer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    keys, _ = issuer
    hits = 0
    release_hang = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        nonlocal hits
        hits += 1
        await release_hang.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/certs", hang)
    server = TestServer(app, host="127.0.0.1", port=free_port())
    await server.start_server()
    monkeypatch.setattr("bot.oidc.CERTS_TIMEOUT", aiohttp.ClientTimeout(total=0.5))
    try:
        async with aiohttp.ClientSession() as session:
            verifier = IdTokenVerifier(
                AUDIENCE, f"http://127.0.0.1:{server.port}/certs", lambda: session
            )
            header = f"Bearer {keys.token()}"
            began = time.monotonic()
            outcomes = await asyncio.gather(
                *(verifier.verify(header) for _ in range(20)), return_exceptions=True
            )
            took = time.monotonic() - began
        assert all(isinstance(o, TokenRefused) and "in time" in str(o) for o in outcomes)
        assert hits == 1 and took < 5.0  # one fetch for all twenty, cut at its timeout
    finally:
        release_hang.set()
        await server.close()
