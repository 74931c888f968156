"""The Home tab through the stand-ins: published when opened, published again when what it
shows changes (and only then), and its buttons open the same forms as the commands."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox.slack.workspace import User
from bot.slack.home_tab import HomeTab
from handlers.entities import RequestState
from tests.support.demo_stack import Stack, demo_stack, text_of


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        yield running


async def home_of(stack: Stack, user: str) -> dict[str, Any] | None:
    async with stack.session.get(f"{stack.url}/sandbox/api/views?user={user}") as reply:
        views = (await reply.json())["views"]
    return next((v for v in views if v["type"] == "home"), None)


def home_tab(stack: Stack) -> HomeTab:
    assert stack.service.chat.home_tab is not None  # built with the core
    return stack.service.chat.home_tab


async def pending(stack: Stack, count: int) -> None:
    """Wait until ``count`` requests are pending, as the Home tab reads them."""

    async def there() -> bool:
        return len(await stack.service.store.requests_in([RequestState.PENDING])) == count

    await stack.wait_for(there)


def shown(view: dict[str, Any]) -> str:
    return text_of({"text": "", "blocks": view["blocks"]})


async def open_home(stack: Stack, user: str) -> dict[str, Any]:
    status, body = await stack.post("/sandbox/api/home", {"user": user})
    assert status == 200 and body["status"] == 200, body

    async def published() -> dict[str, Any] | None:
        return await home_of(stack, user)

    result: dict[str, Any] = await stack.wait_for(published)
    return result


async def test_home_shows_requests_operations_and_clusters(stack: Stack) -> None:
    # the tab shows the last sweep's idle clusters: let the first sweep's report land first,
    # or it lands between the two refreshes below and changes the tab (seen under load)
    await stack.wait_for(stack.service.core.sweeper.latest)
    await stack.home_refreshed_by_hand()
    home = await open_home(stack, "alice")
    text = shown(home)
    assert "Your requests (0)" in text and "Waiting for your approval (0)" in text
    assert "Operations in flight (0)" in text
    assert "train01" in text and "cpu01" in text and "$/H" in text
    assert "Resize a pool…" in text
    # the demo's cpu01 and train01 each have a drained node: health problems at the last sweep
    assert "Health problems (2)" in text and "1 node out of service" in text
    month = time.strftime("%B %Y", time.gmtime())
    assert f"{month}: ~$" in text and "clusterbot saved ~$" in text  # as of the last sweep

    await stack.card("alice", "/cluster resize train01 a4 3")
    await pending(stack, 1)  # the card is posted a moment before its request is pending
    assert await home_tab(stack).refresh() == 1  # alice's tab changed
    assert await home_tab(stack).refresh() == 0  # nothing new: nothing published
    mine = shown(await home_of(stack, "alice") or {})
    assert "Your requests (1)" in mine and "train01" in mine

    bob = shown(await open_home(stack, "bob"))
    assert "Waiting for your approval (1)" in bob and "Your requests (0)" in bob
    carol = shown(await open_home(stack, "carol"))
    assert "Waiting for your approval (0)" in carol  # a viewer approves nothing
    assert "Resize a pool…" not in carol  # nor gets the forms


async def test_a_home_button_opens_the_resize_form(stack: Stack) -> None:
    home = await open_home(stack, "alice")
    status, body = await stack.post(
        "/sandbox/api/click",
        {"user": "alice", "view_id": home["id"], "action_id": "open_form_resize"},
    )
    assert status == 200 and body["status"] == 200, body

    async def form() -> list[dict[str, Any]]:
        async with stack.session.get(f"{stack.url}/sandbox/api/views?user=alice") as reply:
            views = (await reply.json())["views"]
        return [v for v in views if v["type"] == "modal"]

    [modal] = await stack.wait_for(form)
    assert modal["title"] == "Resize a node pool"


async def test_a_refresh_lists_the_clusters_once_for_every_tab(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, expiry_seconds=600, sweep_interval=3600) as stack:
        sweeper = stack.service.core.sweeper
        await stack.wait_for(sweeper.latest)  # the sweep at start, which lists too, is done
        await stack.home_refreshed_by_hand()
        for user in ("alice", "bob", "carol"):
            await open_home(stack, user)

        async def listings() -> int:
            calls = await stack.requests("GET")
            return sum(1 for r in calls if r["path"].endswith("/modelDevelopmentClusters"))

        await stack.card("alice", "/cluster resize train01 a4 3")
        await pending(stack, 1)
        assert await home_tab(stack).refresh() == 2  # alice's and bob's tabs changed
        before = await listings()
        assert await home_tab(stack).refresh() == 0  # nothing new
        # one listing of each target for the three tabs, not one for each tab
        assert await listings() - before == len(stack.service.settings.targets)
        carol = shown(await home_of(stack, "carol") or {})
        assert "Waiting for your approval (0)" in carol and "Your requests (0)" in carol


async def test_many_opens_share_one_reading_and_are_acked_before_it(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, expiry_seconds=600, sweep_interval=3600) as stack:
        await stack.wait_for(stack.service.core.sweeper.latest)
        await stack.home_refreshed_by_hand()

        async def listings() -> int:
            calls = await stack.requests("GET")
            return sum(1 for r in calls if r["path"].endswith("/modelDevelopmentClusters"))

        before = await listings()
        await stack.fault(method="GET", path="modelDevelopmentClusters$", latency_ms=4000)
        users = [f"U0OPEN{n:03d}" for n in range(40)]
        for user in users:  # forty people of the workspace open the tab at once
            stack.workspace.users[user] = User(user, user.lower(), "viewer", user)
        began = asyncio.get_running_loop().time()
        acks = await asyncio.gather(
            *(stack.post("/sandbox/api/home", {"user": user}) for user in users)
        )
        acked = asyncio.get_running_loop().time() - began
        assert all(status == 200 and body["status"] == 200 for status, body in acks), acks
        assert acked < 3.0  # Slack retries an event not acked in 3 s; the listing takes 4

        async def published() -> bool:
            return all([await home_of(stack, user) is not None for user in users])

        await stack.wait_for(published, limit=20)
        # one reading of each target for the forty tabs, not one for each
        assert await listings() - before == len(stack.service.settings.targets)
