"""The whole stack on a loopback port, as `clusterbot demo` runs it, with fast settings."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer
from slack_sdk.signature import SignatureVerifier

from bot.app import ClusterbotService
from bot.demo import build_demo
from bot.sandbox.controlplane import Durations, SimulatorState
from bot.sandbox.slack import Workspace
from handlers.policy import Policy
from tests.support.ports import free_port

TRAIN01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"
CPU01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/cpu01"
# In the simulator, in a project the demo does not target: the bot must refuse it.
SIDE01 = "projects/other-project/locations/us-central1/modelDevelopmentClusters/side01"


@dataclass
class Stack:
    url: str
    service: ClusterbotService
    workspace: Workspace
    simulator: SimulatorState
    session: aiohttp.ClientSession

    async def deliver(self, body: str) -> tuple[int, str]:
        """POST a form body to the bot, signed with the workspace's secret, as Slack does;
        the status and the body of the answer."""
        stamp = str(int(time.time()))
        signature = SignatureVerifier(self.workspace.signing_secret).generate_signature(
            timestamp=stamp, body=body
        )
        async with self.session.post(
            f"{self.url}/slack/events",
            data=body.encode(),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "X-Slack-Request-Timestamp": stamp,
                "X-Slack-Signature": signature or "",
            },
        ) as reply:
            return reply.status, await reply.text()

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        async with self.session.post(f"{self.url}{path}", json=body) as reply:
            return reply.status, await reply.json()

    async def command(self, user: str, text: str, channel: str = "ml-infra") -> dict[str, Any]:
        status, body = await self.post(
            "/sandbox/api/command", {"user": user, "channel": channel, "text": text}
        )
        assert status == 200, body
        assert body["status"] == 200, body
        return dict(body)

    async def click(
        self, user: str, ts: str, action: str, channel: str = "ml-infra", value: str | None = None
    ) -> Any:
        """Click a button, or pick a menu's option by its ``value`` (the first by default)."""
        clicked = {"user": user, "channel": channel, "ts": ts, "action_id": action}
        status, body = await self.post(
            "/sandbox/api/click", clicked if value is None else {**clicked, "value": value}
        )
        assert status == 200, body
        return body

    async def messages(self, user: str | None = None) -> list[dict[str, Any]]:
        query = "channel=ml-infra" + (f"&user={user}" if user else "")
        async with self.session.get(f"{self.url}/sandbox/api/messages?{query}") as reply:
            return list((await reply.json())["messages"])

    async def wait(
        self, predicate: Callable[[list[dict[str, Any]]], Any], limit: float = 30.0
    ) -> list[dict[str, Any]]:
        """Messages once ``predicate(messages)`` holds; the bot works after its ack."""
        deadline = asyncio.get_running_loop().time() + limit
        while True:
            messages = await self.messages()
            if predicate(messages):
                return messages
            if asyncio.get_running_loop().time() > deadline:
                shown = json.dumps([(m["user"], m["ephemeral_to"], m["text"]) for m in messages])
                raise AssertionError(f"timed out; messages: {shown}")
            await asyncio.sleep(0.05)

    async def home_refreshed_by_hand(self) -> None:
        """Take the Home tab's scheduled refresh away (its first run is due at start, and
        under load it ran between a test's own refreshes) and wait out a run in flight, so
        that a test counting publishes is the only one refreshing."""
        self.service.jobs.scheduler.remove_job("home-tabs")

        async def settled() -> bool:
            return "home-tabs" not in self.service.jobs.busy

        await self.wait_for(settled)

    async def wait_for(self, check: Callable[[], Awaitable[Any]], limit: float = 30.0) -> Any:
        """Wait until ``check()`` holds: lasting state (rows, request logs), never a sleep."""
        deadline = asyncio.get_running_loop().time() + limit
        while True:
            result = await check()
            if result:
                return result
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("timed out waiting for lasting state")
            await asyncio.sleep(0.05)

    async def reply_to(self, user: str, text: str) -> dict[str, Any]:
        """Run a command and return the new message it answered with (an alert a sweep
        posts meanwhile is not it, nor a line in a thread: the end of a change told late)."""
        seen = {m["ts"] for m in await self.messages()}

        def new(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [
                m
                for m in messages
                if m["ts"] not in seen and not from_a_sweep(m) and m["thread_ts"] is None
            ]

        await self.command(user, text)
        return new(await self.wait(new))[-1]

    async def card(self, user: str, text: str) -> dict[str, Any]:
        """Run a change command and return the new approval card it posts."""
        seen = {m["ts"] for m in await self.messages() if is_card(m)}

        def new(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [m for m in messages if is_card(m) and m["ts"] not in seen]

        await self.command(user, text)
        return new(await self.wait(new))[-1]

    async def requests(self, method: str | None = None) -> list[dict[str, Any]]:
        query = f"?method={method}" if method else ""
        async with self.session.get(f"{self.url}/vertex/_sim/requests{query}") as reply:
            return list((await reply.json())["requests"])

    async def fault(self, **spec: Any) -> None:
        status, body = await self.post("/vertex/_sim/faults", spec)
        assert status == 201, body


def pool_of(cluster: dict[str, Any], pool_id: str) -> dict[str, Any]:
    """A node pool of a stored cluster by id (the API does not keep the pools' order)."""
    return next(p for p in cluster["nodePools"] if p["id"] == pool_id)


def from_a_sweep(message: dict[str, Any]) -> bool:
    """A health or idle alert, posted in the channel by a sweep, not in answer to anyone."""
    said = message.get("text") or ""
    return message.get("ephemeral_to") is None and said.startswith(("Health: ", "Idle cluster "))


def is_card(message: dict[str, Any]) -> bool:
    blocks = message.get("blocks") or []
    return (
        bool(blocks)
        and blocks[0].get("type") == "header"
        and "request:" in blocks[0]["text"]["text"]
    )


def text_of(message: dict[str, Any]) -> str:
    """Everything a person reads in a message: its text and every text in its blocks."""
    parts = [message.get("text") or ""]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                parts.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(message.get("blocks") or [])
    return "\n".join(parts)


@asynccontextmanager
async def demo_stack(
    tmp: Path,
    *,
    durations: Durations | None = None,
    policy: Policy | None = None,
    expiry_seconds: float = 0.2,
    lease: float | None = None,
    working_after: float | None = None,
    **settings: Any,
) -> AsyncIterator[Stack]:
    port = free_port()
    overrides = {"vertex_retry_deadline": 1.0, **settings}
    app, service, workspace, simulator = build_demo(
        "127.0.0.1",
        port,
        data_dir=tmp,
        durations=durations or Durations(create=1, update=0.6, delete=0.6),
        tick_seconds=0.1,
        policy=policy,
        settings_overrides=overrides,
        expiry_seconds=expiry_seconds,
        lease=lease,
        working_after=working_after,
    )
    server = TestServer(app, host="127.0.0.1", port=port)
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            yield Stack(f"http://127.0.0.1:{port}", service, workspace, simulator, session)
    finally:
        await service.stop()  # while the stand-ins it talks to still answer
        await server.close()


def thread_of(messages: list[dict[str, object]], card: dict[str, object]) -> list[str]:
    """The texts of the messages in a card's thread."""
    return [text_of(m) for m in messages if m["thread_ts"] == card["ts"]]


MENTION = "your request"  # how the reply that mentions the requester reads


def ends_and_mentions(texts: list[str]) -> tuple[list[str], list[str]]:
    """A thread's messages: those that show progress and the end, and those that mention the
    requester to tell how it ended (one of each, whatever crashed in between)."""
    mentions = [t for t in texts if MENTION in t]
    return [t for t in texts if MENTION not in t], mentions
