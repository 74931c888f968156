"""Signed payloads of every shape for the surfaces other than commands: view submissions,
block_suggestion, Home tab events, clicks, and bodies for the release API. Each must get
exactly one well-formed answer: an HTTP status the surface documents, a body that is empty or
a JSON object, and no task failing after it.

Shared by the fuzz test in `make test` and the stress run in `make bench` (10,000 cases).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from hypothesis import strategies as st
from slack_sdk.signature import SignatureVerifier

from handlers.policy import Policy
from tests.support.demo_stack import CPU01, SIDE01, TRAIN01, Stack, demo_stack

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
TEXT = st.sampled_from(["", "cpu01", "train01", CPU01, TRAIN01, SIDE01, "3", "-1", "💥"]) | st.text(
    max_size=30
)
USERS = st.sampled_from(["U0ALICE", "U0BOB", "U0CAROL", "U0NOBODY"]).map(lambda u: {"id": u})
KINDS = st.sampled_from(["resize", "delete", "script", "setting", "bogus"])


def metadata() -> st.SearchStrategy[str]:
    good = st.fixed_dictionaries(
        {"kind": KINDS, "channel": st.sampled_from(["C0MLINFRA", "C0NOWHERE"])},
        optional={"cluster": TEXT, "which": st.sampled_from(["prolog", "epilog"]), "place": TEXT},
    ).map(json.dumps)
    return good | st.text(max_size=40) | JSON.map(json.dumps)


def entry() -> st.SearchStrategy[dict[str, Any]]:
    """One input's state as Slack sends it, or something else."""
    return (
        TEXT.map(lambda v: {"type": "plain_text_input", "value": v})
        | TEXT.map(lambda v: {"type": "external_select", "selected_option": {"value": v}})
        | TEXT.map(lambda v: {"type": "static_select", "selected_option": {"value": v}})
        | st.just({"type": "file_input", "files": []})
        | JSON.map(lambda v: {"type": "plain_text_input", "value": v})
    )


BLOCKS = ["cluster", "pool", "min", "max", "confirm", "key", "value", "paste", "place", "file"]


def state() -> st.SearchStrategy[dict[str, Any]]:
    fields = st.dictionaries(
        st.sampled_from(BLOCKS) | st.text(max_size=6),
        st.dictionaries(st.sampled_from([f"form_{b}" for b in BLOCKS]), entry(), max_size=2),
        max_size=5,
    )
    return fields.map(lambda values: {"values": values})


def view() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "id": st.text(min_size=1, max_size=12),
            "type": st.sampled_from(["modal", "home", "workflow_step"]),
            "hash": st.text(max_size=12),
            "callback_id": st.sampled_from(["clusterbot_form", "someone_elses"]),
            "private_metadata": metadata(),
            "state": state(),
        }
    )


def payloads() -> st.SearchStrategy[dict[str, Any]]:
    submission = st.fixed_dictionaries(
        {"type": st.just("view_submission"), "user": USERS, "view": view()}
    )
    suggestion = st.fixed_dictionaries(
        {
            "type": st.just("block_suggestion"),
            "user": USERS,
            "action_id": st.sampled_from(["form_cluster", "form_pool"]) | st.text(max_size=10),
            "value": TEXT,
            "view": view(),
        }
    )
    click = st.fixed_dictionaries(
        {
            "type": st.just("block_actions"),
            "user": USERS,
            "trigger_id": st.just("1.2.3") | st.text(max_size=4),
            "actions": st.lists(
                st.fixed_dictionaries(
                    {
                        "action_id": st.sampled_from(
                            ["approve", "idle_snooze", "form_cluster", "open_form_resize"]
                        )
                        | st.text(max_size=10),
                        "value": TEXT,
                    }
                ),
                min_size=1,
                max_size=2,
            ),
            "view": view(),
        }
    )
    anything = st.dictionaries(st.sampled_from(["type", "user", "view", "actions"]), JSON)
    return submission | suggestion | click | anything


def events() -> st.SearchStrategy[dict[str, Any]]:
    home = st.fixed_dictionaries(
        {
            "type": st.just("app_home_opened"),
            "user": st.sampled_from(["U0ALICE", "U0CAROL", "U0NOBODY"]) | st.text(max_size=8),
            "tab": st.sampled_from(["home", "messages"]) | st.text(max_size=8),
        }
    )
    other = st.dictionaries(st.sampled_from(["type", "user", "tab"]), JSON)
    return st.fixed_dictionaries(
        {"type": st.just("event_callback"), "team_id": st.just("T0DEMO"), "event": home | other}
    )


def releases() -> st.SearchStrategy[Any]:
    body = st.fixed_dictionaries(
        {},
        optional={
            "cluster": TEXT | JSON,
            "then": st.sampled_from(["scale-to-zero", "delete", "explode"]) | JSON,
            "timeout": st.sampled_from(["1h", "30m", "0", "8d", "soon"]) | JSON,
        },
    )
    return body | JSON


@dataclass
class Case:
    surface: str  # "interactive", "event" or "release"
    body: Any


def cases() -> st.SearchStrategy[Case]:
    return (
        payloads().map(lambda p: Case("interactive", p))
        | events().map(lambda e: Case("event", e))
        | releases().map(lambda b: Case("release", b))
    )


# What each surface may answer: Slack's request URL takes 200 (or our 400 for what Slack never
# sends); the release API's documented statuses (bot/release_api.py).
STATUSES = {"interactive": {200, 400}, "event": {200, 400}, "release": {202, 400, 403, 429}}


@dataclass
class Surfaces:
    stack: Stack
    token: str  # a release caller's ID token
    failures: list[str] = field(default_factory=list)  # tasks that failed after an answer

    async def send(self, case: Case) -> tuple[int, str]:
        if case.surface == "release":
            headers = {"Authorization": f"Bearer {self.token}"}
            async with self.stack.session.post(
                f"{self.stack.url}/api/v1/release", json=case.body, headers=headers
            ) as reply:
                return reply.status, await reply.text()
        if case.surface == "event":
            body, kind = json.dumps(case.body), "application/json"
        else:
            body = urlencode({"payload": json.dumps(case.body)})
            kind = "application/x-www-form-urlencoded"
        stamp = str(int(time.time()))
        secret = self.stack.workspace.signing_secret
        signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
        headers = {
            "Content-Type": kind,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature or "",
        }
        async with self.stack.session.post(
            f"{self.stack.url}/slack/events", data=body.encode(), headers=headers
        ) as reply:
            return reply.status, await reply.text()

    async def settled(self) -> None:
        tasks = self.stack.service.chat.background.tasks
        while tasks:
            await asyncio.wait(set(tasks))


def well_formed(case: Case, status: int, text: str) -> bool:
    if status not in STATUSES[case.surface]:
        return False
    if not text.strip():
        return case.surface != "release"
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


async def answer(surfaces: Surfaces, case: Case) -> str | None:
    """What was wrong with the case's answer, or None when it was one well-formed answer."""
    return (await answer_status(surfaces, case))[1]


async def answer_status(surfaces: Surfaces, case: Case) -> tuple[int, str | None]:
    """The case's HTTP status, and what was wrong with its answer (None: nothing)."""
    before = len(surfaces.failures)
    status, text = await surfaces.send(case)
    await surfaces.settled()
    if not well_formed(case, status, text):
        shown = json.dumps(case.body)[:300]
        return status, f"{case.surface}: HTTP {status} {text[:80]!r} for {shown}"
    if len(surfaces.failures) > before:
        return status, f"{case.surface}: {surfaces.failures[-1]}"
    return status, None


@asynccontextmanager
async def surfaces(
    tmp_path: Path, token: str, audience: str, certs_url: str
) -> AsyncIterator[Surfaces]:
    policy = Policy.model_validate(
        {
            "roles": {"operator": ["U0ALICE"], "approver": ["U0BOB"]},
            "pipelines": {"*@demo-project.iam.gserviceaccount.com": {"ask": ["delete"]}},
        }
    )
    async with demo_stack(
        tmp_path,
        policy=policy,
        oidc_audience=audience,
        oidc_certs_url=certs_url,
        sweep_interval=3600,
        working_after=2.0,
    ) as stack:
        found = Surfaces(stack, token)
        loop = asyncio.get_running_loop()
        before = loop.get_exception_handler()

        def failed(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            found.failures.append(str(context.get("message")))  # "Task exception was never…"

        class Errors(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                found.failures.append(f"{record.name}: {record.getMessage()[:120]}")

        errors = Errors(logging.ERROR)
        loop.set_exception_handler(failed)
        logging.getLogger().addHandler(errors)
        try:
            yield found
        finally:
            logging.getLogger().removeHandler(errors)
            loop.set_exception_handler(before)
