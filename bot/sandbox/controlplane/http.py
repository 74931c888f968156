"""What the simulator's routes share: the state's key in the app, and reading a body."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.sandbox.controlplane.rpc import invalid
from bot.sandbox.controlplane.state import SimulatorState

STATE = web.AppKey("simulator_state", SimulatorState)


async def json_body(request: web.Request) -> dict[str, Any]:
    if not request.body_exists:
        return {}
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise invalid("Invalid JSON payload received.") from None
    if not isinstance(body, dict):
        raise invalid("Invalid JSON payload received: expected an object.")
    return body


def cluster_named(state: SimulatorState, body: dict[str, Any]) -> str:
    if not body.get("cluster"):
        raise invalid("cluster is required: a short id or a full resource name")
    return state.resolve(str(body["cluster"]))
