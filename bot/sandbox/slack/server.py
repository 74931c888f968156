"""The fake Slack's routes: Web API, response URLs, the JSON API for scripts, and the page.

``install(app, workspace)`` adds them to an aiohttp app (the demo serves the bot and the
control-plane simulator from the same app); ``create_app`` makes a standalone one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bot.sandbox.slack import delivery, view_routes, webapi
from bot.sandbox.slack.errors import SlackError
from bot.sandbox.slack.keys import LIMITS, SESSION, WORKSPACE
from bot.sandbox.slack.keys import error_response as _error
from bot.sandbox.slack.keys import json_body as _body
from bot.sandbox.slack.keys import origin_of as _origin
from bot.sandbox.slack.uploads import UPLOAD_POLICIES
from bot.sandbox.slack.workspace import Channel, User, Workspace

STATIC = Path(__file__).with_name("static")
KEEPALIVE_SECONDS = 15.0


async def _peek(request: web.Request) -> dict[str, Any]:
    """The JSON body, read once (aiohttp keeps it for a second read), or {} when it is not."""
    try:
        return await _body(request)
    except SlackError:
        return {}


# -- Web API and response URLs ---------------------------------------------------------------


async def api_method(request: web.Request) -> web.Response:
    return await webapi.call(
        request.app[WORKSPACE], request.app[LIMITS], request.match_info["method"], request
    )


async def response_url(request: web.Request) -> web.Response:
    ws = request.app[WORKSPACE]
    try:
        entry = ws.use_response_url(request.match_info["token"])
        body = await _body(request)
        text, blocks = webapi.text_and_blocks(body, required=False)
        source = None
        if entry.source_ts is not None:
            with contextlib.suppress(SlackError):
                source = ws.find(entry.channel, entry.source_ts)
        if body.get("delete_original"):
            if source is not None:
                ws.delete(source)
            return web.json_response({"ok": True})
        # "replace_original" replaces the message the URL belongs to: the message an action
        # came from, or a command's earlier reply through this same URL
        # (https://docs.slack.dev/messaging/modifying-messages, "Updating messages using
        # response_url").
        if body.get("replace_original") and source is not None:
            if text is None and blocks is None:
                raise SlackError("no_text", status=400)
            ws.update(source, text or "", blocks or [], ws.bot.id)
            return web.json_response({"ok": True})
        if not text and not blocks:
            raise SlackError("no_text", status=400)
        default = "ephemeral" if entry.kind == "command" else "in_channel"
        ephemeral = (body.get("response_type") or default) == "ephemeral"
        posted = ws.post(
            entry.channel,
            ws.bot.id,
            text or "",
            blocks,
            thread_ts=body.get("thread_ts") or None,
            ephemeral_to=entry.user if ephemeral else None,
        )
        if entry.kind == "command":
            entry.source_ts = posted.ts
    except SlackError as error:
        return _error(error)
    return web.json_response({"ok": True})


# -- the JSON API ------------------------------------------------------------------------------


async def list_users(request: web.Request) -> web.Response:
    ws = request.app[WORKSPACE]
    return web.json_response([u.to_api() for u in ws.users.values() if not u.is_bot])


async def list_channels(request: web.Request) -> web.Response:
    ws = request.app[WORKSPACE]
    return web.json_response([c.to_api() for c in ws.channels.values()])


async def workspace_info(request: web.Request) -> web.Response:
    ws = request.app[WORKSPACE]
    return web.json_response(
        {
            "team_id": ws.team_id,
            "team": ws.team_domain,
            "command": ws.command,
            "bot": ws.bot.to_api(),
        }
    )


Send = Callable[
    [Workspace, aiohttp.ClientSession, str, User, Channel, dict[str, Any]],
    Awaitable[delivery.Delivery],
]


async def _deliver(request: web.Request, send: Send) -> web.Response:
    """Resolve the body's user and channel, deliver to the app, answer {status, body}."""
    ws = request.app[WORKSPACE]
    try:
        body = await _body(request)
        user = ws.user(str(body.get("user", "")))
        channel = ws.channel(str(body.get("channel", "")))
        result = await send(ws, request.app[SESSION], _origin(request), user, channel, body)
    except SlackError as error:
        return _error(error)
    return web.json_response(result.to_api())


async def send_command(request: web.Request) -> web.Response:
    return await _deliver(
        request,
        lambda ws, session, origin, user, channel, body: delivery.deliver_command(
            ws, session, origin, user, channel, str(body.get("text", ""))
        ),
    )


async def click(request: web.Request) -> web.Response:
    if "view_id" in (body := await _peek(request)):
        return await view_routes.view_click(request, body)
    return await _deliver(
        request,
        lambda ws, session, origin, user, channel, body: delivery.deliver_click(
            ws,
            session,
            origin,
            user,
            channel,
            str(body.get("ts", "")),
            str(body.get("action_id", "")),
            str(body["value"]) if body.get("value") is not None else None,
        ),
    )


async def messages(request: web.Request) -> web.Response:
    ws = request.app[WORKSPACE]
    try:
        channel = ws.channel(request.query.get("channel", ""))
        viewer = ws.user(request.query["user"]).id if request.query.get("user") else None
    except SlackError as error:
        return _error(SlackError(error.code, status=404))
    return web.json_response({"messages": [m.to_api() for m in ws.history(channel.id, viewer)]})


def _config(ws: Workspace, limits: webapi.RateLimits) -> dict[str, Any]:
    return {
        "bot_token": ws.bot_token,
        "signing_secret": ws.signing_secret,
        "bot_url": ws.bot_url,
        "app_token": ws.app_token,
        "rate_limits": limits.per_minute,
        "force_ratelimit": limits.forced,
        "ratelimited": limits.refused,
        "ratelimited_by_method": limits.refused_by_method,
        "ratelimit_all_until": limits.refuse_until,
        "enterprise_id": ws.enterprise_id,
        "upload_policy": ws.upload_policy,
    }


async def configuration(request: web.Request) -> web.Response:
    """What a real `clusterbot serve` attached to this stand-in needs: the bot token, the
    signing secret, and where deliveries go."""
    return web.json_response(_config(request.app[WORKSPACE], request.app[LIMITS]))


async def configure(request: web.Request) -> web.Response:
    """Set where deliveries go (one URL, or several spread over in turn), the signing secret,
    Web API rate limits, and whether the workspace is in an Enterprise Grid org."""
    ws = request.app[WORKSPACE]
    limits = request.app[LIMITS]
    try:
        body = await _body(request)
    except SlackError as error:
        return _error(error)
    if "bot_url" in body:
        value = body["bot_url"]
        if isinstance(value, list):
            ws.bot_url = [str(v) for v in value if v]
        else:
            ws.bot_url = str(value) if value else None
    if body.get("signing_secret"):
        ws.signing_secret = str(body["signing_secret"])
    if "app_token" in body:
        ws.app_token = str(body["app_token"]) or None
    limits.per_minute.update({str(k): int(v) for k, v in body.get("rate_limits", {}).items()})
    limits.forced.update({str(k): int(v) for k, v in body.get("force_ratelimit", {}).items()})
    if "retry_after" in body:
        limits.retry_after = max(1, int(body["retry_after"]))
    if "ratelimit_all_for" in body:
        # a 429 storm: every Web API call refused for that many seconds, each told how long
        # is left in Retry-After (https://api.slack.com/apis/rate-limits)
        limits.refuse_until = ws.clock() + max(0.0, float(body["ratelimit_all_for"]))
    if "upload_policy" in body:
        policy = body["upload_policy"] or None
        if policy is not None and policy not in UPLOAD_POLICIES:
            return _error(SlackError("invalid_arguments"))
        ws.upload_policy = policy
    if body.get("enterprise_id"):
        ws.join_grid(str(body["enterprise_id"]), str(body.get("enterprise_name") or "Grid org"))
    return web.json_response(_config(ws, limits))


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: every new, edited or deleted message the viewer may see."""
    ws = request.app[WORKSPACE]
    viewer = request.query.get("user")
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    ws.listeners.add(queue)
    try:
        await response.write(b": connected\n\n")
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            if event is None:
                break
            if "message" not in event:  # a user's views changed: only that user's page hears
                if viewer is None or event.get("user") == viewer:
                    await response.write(f"data: {json.dumps(event)}\n\n".encode())
                continue
            target = event["message"]["ephemeral_to"]
            if target is not None and viewer is not None and target != viewer:
                continue
            await response.write(f"data: {json.dumps(event)}\n\n".encode())
    except ConnectionResetError:
        pass
    finally:
        ws.listeners.discard(queue)
    return response


async def socket_mode(request: web.Request) -> web.WebSocketResponse:
    """The app's Socket Mode connection: hello, then envelopes out and acks back."""
    ws = request.app[WORKSPACE]
    socket = web.WebSocketResponse(heartbeat=30)
    await socket.prepare(request)
    await socket.send_json(
        {
            "type": "hello",
            "num_connections": len(ws.sockets) + 1,
            "debug_info": {"host": "sandbox", "approximate_connection_time": 18060},
            "connection_info": {"app_id": ws.app_id},
        }
    )
    ws.sockets.append(socket)
    try:
        async for message in socket:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            try:
                ack = json.loads(message.data)
            except ValueError:
                continue
            pending = ws.pending_acks.get(str(ack.get("envelope_id")))
            if pending is not None and not pending.done():
                pending.set_result(ack)
    finally:
        ws.sockets.remove(socket)
    return socket


async def _close_sockets(app: web.Application) -> None:
    for socket in list(app[WORKSPACE].sockets):
        await socket.close()


async def page(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


# -- assembly ----------------------------------------------------------------------------------


async def _session_ctx(app: web.Application) -> Any:
    async with aiohttp.ClientSession() as session:
        app[SESSION] = session
        yield


async def _close_listeners(app: web.Application) -> None:
    app[WORKSPACE].close_listeners()


def install(app: web.Application, workspace: Workspace, *, api_prefix: str = "/api") -> None:
    """Add the fake Slack's routes to ``app``; the Web API base URL is ``{origin}{api_prefix}/``."""
    app[WORKSPACE] = workspace
    app[LIMITS] = webapi.RateLimits()
    app.cleanup_ctx.append(_session_ctx)
    app.on_shutdown.append(_close_listeners)
    app.on_shutdown.append(_close_sockets)
    app.router.add_route("*", f"{api_prefix}/{{method}}", api_method)
    app.router.add_post("/sandbox/response/{token}", response_url)
    app.router.add_get("/sandbox/api/users", list_users)
    app.router.add_get("/sandbox/api/channels", list_channels)
    app.router.add_get("/sandbox/api/workspace", workspace_info)
    app.router.add_post("/sandbox/api/command", send_command)
    app.router.add_post("/sandbox/api/click", click)
    app.router.add_get("/sandbox/api/messages", messages)
    app.router.add_post("/sandbox/api/config", configure)
    app.router.add_get("/sandbox/api/config", configuration)
    app.router.add_get("/sandbox/api/events", events)
    app.router.add_get("/sandbox/socket", socket_mode)
    view_routes.install(app)
    app.router.add_get("/", page)
    app.router.add_static("/static/", STATIC)


def create_app(workspace: Workspace) -> web.Application:
    app = web.Application()
    install(app, workspace)
    return app
