"""The JSON API for modals and the Home tab, the files a modal was given, and the page's icon.

- ``GET /sandbox/api/views?user=U`` -> ``{"views": [{"id", "type", "title", "blocks", ...}]}``:
  that user's open modals (bottom first) and Home tab.
- ``POST /sandbox/api/submit {"user", "view_id", "values": {block_id: {action_id: value}}}``
  -> a signed ``view_submission`` -> ``{"status", "body", "errors"}``.
- ``POST /sandbox/api/click {"user", "view_id", "action_id", "value"}`` -> a pick or click in
  a view (``block_actions`` when the element dispatches).
- ``POST /sandbox/api/suggest {"user", "view_id", "action_id", "value"}`` -> the app's
  ``options`` for what was typed in an external select.
- ``GET /sandbox/api/files/ID``: a shared file, as the page opens it.
- ``POST /sandbox/api/home {"user"}`` -> ``app_home_opened``; ``POST /sandbox/api/close
  {"user", "view_id"}`` closes the user's modals (the Cancel button).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.sandbox.slack import uploads, view_delivery
from bot.sandbox.slack.errors import SlackError
from bot.sandbox.slack.keys import SESSION, WORKSPACE, error_response, json_body, origin_of
from bot.sandbox.slack.workspace import User, Workspace

STATIC = Path(__file__).with_name("static")


async def list_views(request: web.Request) -> web.Response:
    ws = request.app[WORKSPACE]
    try:
        user = ws.user(request.query.get("user", ""))
    except SlackError as error:
        return error_response(SlackError(error.code, status=404))
    return web.json_response({"views": [v.to_sandbox() for v in ws.views.of_user(user.id)]})


Work = Callable[[web.Request, Workspace, User, dict[str, Any]], Awaitable[dict[str, Any]]]


async def _as_user(
    request: web.Request, work: Work, body: dict[str, Any] | None = None
) -> web.Response:
    """Resolve the body's user, do the work and answer what it returns; a SlackError is the
    answer instead."""
    ws = request.app[WORKSPACE]
    try:
        body = body if body is not None else await json_body(request)
        user = ws.user(str(body.get("user", "")))
        return web.json_response(await work(request, ws, user, body))
    except SlackError as error:
        return error_response(error)


async def _submit(
    request: web.Request, ws: Workspace, user: User, body: dict[str, Any]
) -> dict[str, Any]:
    values = body.get("values") or {}
    if not isinstance(values, dict) or not all(isinstance(v, dict) for v in values.values()):
        raise SlackError("invalid_values", status=400)
    delivery, errors = await view_delivery.deliver_submission(
        ws, request.app[SESSION], origin_of(request), user, str(body.get("view_id")), values
    )
    return {**delivery.to_api(), "errors": errors}


async def _click(
    request: web.Request, ws: Workspace, user: User, body: dict[str, Any]
) -> dict[str, Any]:
    delivery = await view_delivery.deliver_view_action(
        ws,
        request.app[SESSION],
        origin_of(request),
        user,
        str(body.get("view_id")),
        str(body.get("action_id", "")),
        body.get("value"),
    )
    return delivery.to_api()


async def _suggest(
    request: web.Request, ws: Workspace, user: User, body: dict[str, Any]
) -> dict[str, Any]:
    options = await view_delivery.deliver_suggestion(
        ws,
        request.app[SESSION],
        user,
        str(body.get("view_id")),
        str(body.get("action_id", "")),
        str(body.get("value") or ""),
    )
    return {"options": options}


async def _home(
    request: web.Request, ws: Workspace, user: User, body: dict[str, Any]
) -> dict[str, Any]:
    return (await view_delivery.deliver_home_opened(ws, request.app[SESSION], user)).to_api()


async def _close(
    request: web.Request, ws: Workspace, user: User, body: dict[str, Any]
) -> dict[str, Any]:
    ws.views.clear(user.id)
    return {"ok": True}


async def submit(request: web.Request) -> web.Response:
    return await _as_user(request, _submit)


async def view_click(request: web.Request, body: dict[str, Any]) -> web.Response:
    return await _as_user(request, _click, body)


async def suggest(request: web.Request) -> web.Response:
    return await _as_user(request, _suggest)


async def open_home(request: web.Request) -> web.Response:
    return await _as_user(request, _home)


async def close(request: web.Request) -> web.Response:
    return await _as_user(request, _close)


async def file(request: web.Request) -> web.StreamResponse:
    """A file's ``url_private``: only with the bot token in ``Authorization``; without it Slack
    answers its sign-in page, not the file (https://docs.slack.dev/messaging/working-with-files,
    "Authentication")."""
    ws = request.app[WORKSPACE]
    stored = ws.views.files.get(request.match_info["id"])
    if stored is None or stored.name != request.match_info["name"]:
        return web.Response(status=404, text="file not found")
    if request.headers.get("Authorization", "") != f"Bearer {ws.bot_token}":
        return web.Response(
            text="<!DOCTYPE html><html><body>Sign in to Slack</body></html>",
            content_type="text/html",
        )
    return web.Response(body=stored.content, content_type="text/plain")


async def page_file(request: web.Request) -> web.Response:
    """A shared file as the page (Slack's own client, signed in) opens it."""
    stored = request.app[WORKSPACE].views.files.get(request.match_info["id"])
    if stored is None:
        return web.Response(status=404, text="file not found")
    disposition = f'inline; filename="{stored.name}"'
    # an image is shown as one; any text (a CSV, a script) as text, as Slack's viewer does
    shown = stored.kind[0] if stored.kind[0].startswith("image/") else "text/plain"
    return web.Response(
        body=stored.content, content_type=shown, headers={"Content-Disposition": disposition}
    )


async def favicon(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "favicon.svg")


async def upload(request: web.Request) -> web.Response:
    return await uploads.upload(request, request.app[WORKSPACE])


def install(app: web.Application) -> None:
    app.router.add_post("/sandbox/upload/{file_id}", upload)
    app.router.add_get("/sandbox/api/views", list_views)
    app.router.add_post("/sandbox/api/submit", submit)
    app.router.add_post("/sandbox/api/suggest", suggest)
    app.router.add_post("/sandbox/api/home", open_home)
    app.router.add_post("/sandbox/api/close", close)
    app.router.add_get("/sandbox/files/{id}/{name}", file)
    app.router.add_get("/sandbox/api/files/{id}", page_file)
    app.router.add_get("/favicon.ico", favicon)
