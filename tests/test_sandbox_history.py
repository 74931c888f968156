"""The Slack stand-in's history as Slack gives it to a bot token (conversations.history and
conversations.replies, with message metadata), and the Slack messenger finding by its key a
post whose answer was lost."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.messenger import SlackMessenger
from handlers.messenger import MessengerError
from handlers.replies import Reply, Text
from tests.support.slack_stack import TOKEN, SlackStack


def client_of(stack: SlackStack) -> AsyncWebClient:
    return AsyncWebClient(token=TOKEN, base_url=stack.api_url)


async def test_history_lists_newest_first_with_metadata_only_when_asked(
    stack: SlackStack,
) -> None:
    client = client_of(stack)
    tagged = {"event_type": "clusterbot_owed", "event_payload": {"key": "k1"}}
    first = await client.chat_postMessage(channel="C0MLINFRA", text="one", metadata=tagged)
    await client.chat_postMessage(channel="C0MLINFRA", text="reply", thread_ts=first["ts"])
    await client.chat_postMessage(channel="C0MLINFRA", text="two")
    history = await client.conversations_history(channel="C0MLINFRA")
    assert [m["text"] for m in history["messages"][:2]] == ["two", "one"]  # no thread replies
    assert all("metadata" not in m for m in history["messages"])
    full = await client.conversations_history(
        channel="C0MLINFRA", include_all_metadata=True, oldest=first["ts"], inclusive=True
    )
    assert [m["text"] for m in full["messages"]] == ["two", "one"]
    assert full["messages"][1]["metadata"] == tagged
    page = await client.conversations_history(channel="C0MLINFRA", limit=1)
    assert page["has_more"] and page["response_metadata"]["next_cursor"]
    replies = await client.conversations_replies(channel="C0MLINFRA", ts=first["ts"])
    assert [m["text"] for m in replies["messages"]] == ["one", "reply"]
    with pytest.raises(SlackApiError) as caught:
        await client.conversations_replies(channel="C0MLINFRA", ts="1.000001")
    assert caught.value.response["error"] == "thread_not_found"
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel="C0MLINFRA", text="x", metadata={"event_type": 1})
    assert caught.value.response["error"] == "invalid_metadata_format"


async def test_history_needs_its_scope_and_membership(stack: SlackStack) -> None:
    client = client_of(stack)
    with pytest.raises(SlackApiError) as caught:
        await client.conversations_history(channel="secret-lab")
    assert caught.value.response["error"] == "channel_not_found"  # private, not a member
    stack.workspace.scopes.discard("channels:history")
    with pytest.raises(SlackApiError) as caught:
        await client.conversations_history(channel="C0MLINFRA")
    assert caught.value.response["needed"] == "channels:history"


async def test_the_messenger_finds_its_post_by_key(stack: SlackStack) -> None:
    messenger = SlackMessenger(client_of(stack))
    card = await messenger.post("C0MLINFRA", Reply("card").add(Text("card")))
    posted = await messenger.post("C0MLINFRA", Reply("a").add(Text("a")), key="digest:1")
    said = await messenger.post("C0MLINFRA", Reply("b").add(Text("b")), thread=card, key="k2")
    assert await messenger.find("C0MLINFRA", "digest:1", 0.0) == posted
    assert await messenger.find("C0MLINFRA", "digest:2", 0.0) is None
    assert await messenger.find("C0MLINFRA", "k2", 0.0, thread=card) == said
    stack.workspace.scopes.discard("channels:history")
    with pytest.raises(MessengerError) as refused:
        await messenger.find("C0MLINFRA", "digest:1", 0.0)
    assert refused.value.code == "missing_scope"
