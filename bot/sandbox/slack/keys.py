"""Where the fake Slack's routes find its state on the aiohttp app, and what they share."""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp import web

from bot.sandbox.slack import webapi
from bot.sandbox.slack.errors import SlackError
from bot.sandbox.slack.workspace import Workspace

WORKSPACE = web.AppKey("slack_workspace", Workspace)
LIMITS = web.AppKey("slack_rate_limits", webapi.RateLimits)
SESSION = web.AppKey("slack_delivery_session", aiohttp.ClientSession)


def error_response(error: SlackError) -> web.Response:
    return web.json_response(error.body(), status=error.status if error.status != 200 else 400)


async def json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise SlackError("invalid_json", status=400) from None
    if not isinstance(body, dict):
        raise SlackError("invalid_json", status=400)
    return body


def origin_of(request: web.Request) -> str:
    return request.url.origin().human_repr().rstrip("/")
