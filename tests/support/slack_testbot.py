"""A small Bolt AsyncApp that stands in for clusterbot when testing the Slack stand-in.

It uses only public Bolt APIs (ack, respond, say, client) so that what the stand-in receives
and answers is exactly what a real Bolt app sends and expects.
"""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

CARD_BLOCKS: list[dict[str, Any]] = [
    {"type": "header", "text": {"type": "plain_text", "text": "Resize train01"}},
    {
        "type": "section",
        "text": {"type": "mrkdwn", "text": "*Pool* `a4`: 2 → 3 nodes"},
        "fields": [
            {"type": "mrkdwn", "text": "*Requested by*\n<@U0ALICE>"},
            {"type": "mrkdwn", "text": "*Cost*\n~$+98.32/h"},
        ],
    },
    {"type": "context", "elements": [{"type": "mrkdwn", "text": "Expires in 1 hour"}]},
    {"type": "divider"},
    {
        "type": "actions",
        "block_id": "decision",
        "elements": [
            {
                "type": "button",
                "action_id": "approve",
                "style": "primary",
                "value": "req-1",
                "text": {"type": "plain_text", "text": "Approve"},
            },
            {
                "type": "button",
                "action_id": "reject",
                "style": "danger",
                "value": "req-1",
                "text": {"type": "plain_text", "text": "Reject"},
                "confirm": {
                    "title": {"type": "plain_text", "text": "Reject this change?"},
                    "text": {"type": "mrkdwn", "text": "The request will be *closed*."},
                    "confirm": {"type": "plain_text", "text": "Reject"},
                    "deny": {"type": "plain_text", "text": "Keep it"},
                    "style": "danger",
                },
            },
        ],
    },
]


def build_test_bot(api_url: str, token: str, signing_secret: str) -> AsyncApp:
    app = AsyncApp(
        client=AsyncWebClient(token=token, base_url=api_url),
        signing_secret=signing_secret,
    )

    @app.command("/cluster")
    async def cluster(ack: Any, command: dict[str, Any], respond: Any, say: Any) -> None:
        text = command["text"]
        if text == "help":
            await ack("usage: /cluster help | ping | card")
        elif text == "ping":
            await ack()
            await respond("pong")
        elif text == "card":
            await ack()
            await say(text="Resize train01: approval needed", blocks=CARD_BLOCKS)
        elif text == "broadcast":
            await ack({"response_type": "in_channel", "text": "everyone sees this"})
        else:
            await ack(f"unknown subcommand {text!r}")

    @app.action("approve")
    async def approve(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        channel = body["channel"]["id"]
        ts = body["message"]["ts"]
        user = body["user"]["id"]
        await client.chat_update(
            channel=channel,
            ts=ts,
            text="Approved",
            blocks=[
                {"type": "section", "text": {"type": "mrkdwn", "text": f"*Approved* by <@{user}>"}}
            ],
        )
        await client.chat_postMessage(channel=channel, thread_ts=ts, text="Operation started: 0%")

    @app.action("reject")
    async def reject(ack: Any, respond: Any) -> None:
        await ack()
        await respond(replace_original=True, text="Rejected")

    return app
