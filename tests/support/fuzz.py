"""Commands of every shape, signed and sent to the bot, and the count of what came back.

Shared by the fuzz test in `make test` (a few hundred cases) and the stress run in
`make bench` (10,000). A command's answer is its one message: the body of its ack, a reply
through its response_url ("Working on it…" and the reply that replaces it count as one), or
the approval card it posts in the channel.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import strategies as st

from tests.support.demo_stack import Stack, demo_stack

WORDS = [
    "help",
    "list",
    "show",
    "resize",
    "delete",
    "ops",
    "idle",
    "audit",
    "train01",
    "cpu01",
    "eval01",
    "nope01",
    "a4",
    "cpu",
    "login",
    "3",
    "0",
    "1:6",
    "6:1",
    "-1",
    "１２",
    "999999",
    "projects/demo-project/locations/us-central1/modelDevelopmentClusters/cpu01",
    "<!channel>",
    "&amp;",
    "<@U0BOB>",
    "`",
    "*",
    "\u202e",
    "💥",
    "%",
    "--help",
    "?",
]


def commands() -> st.SearchStrategy[str]:
    """Text after /cluster: the grammar's own words in any order, and anything at all."""
    words = st.lists(st.sampled_from(WORDS) | st.text(min_size=1, max_size=12), max_size=6)
    return (
        words.map(" ".join)
        | st.text(max_size=300)
        | st.text(alphabet=st.characters(codec="utf-8"), min_size=3000, max_size=5000)
    )


@dataclass
class Harness:
    stack: Stack
    hooks: TestServer
    # what reached each command's response_url, and what came back in each one's ack
    hooked: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    acked: dict[str, dict[str, Any]] = field(default_factory=dict)
    statuses: dict[int, int] = field(default_factory=dict)  # HTTP status -> commands

    def internal_errors(self) -> int:
        """Answers that were an internal error (the reference a person is shown)."""
        said = [*self.acked.values(), *(r for rs in self.hooked.values() for r in rs)]
        return sum("internal error" in json.dumps(r) for r in said)

    async def send(self, text: str, user: str = "U0ALICE") -> str:
        """Send one signed command; returns its id (where its response_url points)."""
        command_id = secrets.token_hex(6)
        body = urlencode(
            {
                "token": "t",
                "team_id": "T0DEMO",
                "channel_id": "C0MLINFRA",
                "channel_name": "ml-infra",
                "user_id": user,
                "user_name": "alice",
                "command": "/cluster",
                "text": text,
                "api_app_id": "A0CLUSTERBOT",
                "response_url": str(self.hooks.make_url(f"/hook/{command_id}")),
                "trigger_id": "1.2.3",
            }
        )
        status, answered = await self.stack.deliver(body)
        self.statuses[status] = self.statuses.get(status, 0) + 1
        assert status == 200, answered
        if answered.strip():  # answered in the ack's own body: Slack shows that as the reply
            message = json.loads(answered)
            assert message.get("text") or message.get("blocks"), answered
            self.acked[command_id] = message
        return command_id

    async def settled(self) -> None:
        """Lasting state: every task the commands started has finished."""
        tasks = self.stack.service.chat.background.tasks
        while tasks:
            await asyncio.wait(set(tasks))

    def messages_of(self, command_id: str) -> int:
        """The messages a command left: posts that were not replacements of an earlier one."""
        posts = [r for r in self.hooked[command_id] if r.get("replace_original") is not True]
        return len(posts) + (command_id in self.acked)


@asynccontextmanager
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    app = web.Application(client_max_size=4 * 1024 * 1024)
    recorded: dict[str, list[dict[str, Any]]] = defaultdict(list)

    async def hook(request: web.Request) -> web.Response:
        recorded[request.match_info["id"]].append(await request.json())
        return web.json_response({"ok": True})

    app.router.add_post("/hook/{id}", hook)
    hooks = TestServer(app, host="127.0.0.1")
    await hooks.start_server()
    try:
        async with demo_stack(tmp_path, working_after=2.0) as stack:
            yield Harness(stack, hooks, hooked=recorded)
    finally:
        await hooks.close()


async def cards(stack: Stack) -> int:
    """Approval cards in the channel."""
    return sum(
        1
        for m in await stack.messages()
        if m["ephemeral_to"] is None and m["thread_ts"] is None and "request:" in m["text"]
    )


async def answer_count(run: Harness, text: str) -> tuple[int, int]:
    """(messages in the ack or through the response_url, cards posted) for one command."""
    before = await cards(run.stack)
    command_id = await run.send(text)
    await run.settled()
    return run.messages_of(command_id), await cards(run.stack) - before
