"""Files the app uploads, as Slack's files.uploadV2 flow takes them
(https://docs.slack.dev/messaging/working-with-files#uploading_files):

1. ``files.getUploadURLExternal`` (``filename``, ``length``) hands out an upload URL and a file id;
2. the bytes are POSTed to that URL (200 "OK - LENGTH");
3. ``files.completeUploadExternal`` (``files`` = ``[{"id", "title"}]``, ``channel_id``,
   ``initial_comment``, ``thread_ts``) shares them in a conversation the bot may post in, as a
   message with those files. A file not uploaded, or completed twice, is ``file_not_found``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bot.sandbox.slack.errors import SlackError
from bot.sandbox.slack.views import File, _id
from bot.sandbox.slack.workspace import Workspace

MAX_FILE_BYTES = 1024**3  # Slack takes files up to 1 GB
# files.getUploadURLExternal's errors for an admin's upload setting: no files at all, or
# "Only image file uploads are permitted for this team"
UPLOAD_POLICIES = ("file_uploads_disabled", "file_uploads_except_images_disabled")
IMAGES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp")


@dataclass
class Pending:
    name: str
    length: int
    content: bytes | None = None


def _pending(ws: Workspace) -> dict[str, Pending]:
    """The workspace's uploads begun and not yet completed, by file id."""
    pending: dict[str, Pending] = ws.views.uploads
    return pending


async def get_upload_url(ws: Workspace, args: dict[str, Any], origin: str) -> dict[str, Any]:
    name = str(args.get("filename") or "")
    try:
        length = int(args.get("length") or 0)
    except (TypeError, ValueError):
        raise SlackError("invalid_arguments") from None
    if not name or not 0 < length <= MAX_FILE_BYTES:
        raise SlackError("invalid_arguments")
    policy = ws.upload_policy
    if policy == UPLOAD_POLICIES[0] or (policy and not name.lower().endswith(IMAGES)):
        raise SlackError(policy)
    file_id = _id("F")
    _pending(ws)[file_id] = Pending(name, length)
    return {"ok": True, "upload_url": f"{origin}/sandbox/upload/{file_id}", "file_id": file_id}


async def upload(request: web.Request, ws: Workspace) -> web.Response:
    pending = _pending(ws).get(request.match_info["file_id"])
    if pending is None:
        return web.Response(status=404, text="not found")
    data = await request.read()
    pending.content = data
    return web.Response(text=f"OK - {len(data)}")


async def complete_upload(ws: Workspace, args: dict[str, Any], origin: str) -> dict[str, Any]:
    raw = args.get("files")
    try:
        items = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise SlackError("invalid_arguments") from None
    if not isinstance(items, list) or not items:
        raise SlackError("invalid_arguments")
    channel = ws.channel(str(args.get("channel_id") or "")) if args.get("channel_id") else None
    if channel is not None and channel.postable_error():
        raise SlackError(str(channel.postable_error()))
    shared = []
    for item in items:
        pending = _pending(ws).pop(str(item.get("id")), None)
        if pending is None or pending.content is None:
            raise SlackError("file_not_found")
        stored = File(str(item["id"]), pending.name, pending.content, ws.bot.id, ws.clock())
        ws.views.files[stored.id] = stored
        shared.append({**stored.to_api(origin), "title": str(item.get("title") or pending.name)})
    if channel is not None:
        message = ws.post(
            channel.id,
            ws.bot.id,
            str(args.get("initial_comment") or ""),
            thread_ts=args.get("thread_ts") or None,
        )
        message.files = shared
        ws.publish("message_changed", message)
    return {"ok": True, "files": [{"id": f["id"], "title": f["title"]} for f in shared]}
