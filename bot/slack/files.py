"""Reading the files a person gave a modal's file input, with the bot token, from Slack only.

The token goes only to Slack's file host: a file's ``url_private`` is
``https://files.slack.com/files-pri/{team}-{file}/{name}`` (docs.slack.dev, "Working with
files": "download the file using the url_private ... with an Authorization header"). A
payload naming any other host is refused before anything is sent, so a forged payload cannot
make the bot hand its token to another server or read an internal URL into a card. Where the
Web API base is not Slack's (the stand-in), files are served from that origin instead.
Redirects are not followed, so none carries the token, and each read stops at the script
limit whatever size the payload declares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from handlers.forms.choices import MAX_SCRIPT_BYTES

SLACK_FILES = ("https", "files.slack.com")
FILE_TIMEOUT = aiohttp.ClientTimeout(total=1.5)  # the modal must answer within Slack's 3 s
CHUNK = 16 * 1024


def file_origins(api_base: str) -> set[tuple[str, str]]:
    """The (scheme, host[:port]) pairs a ``url_private`` may name, for this Web API base."""
    origins = {SLACK_FILES}
    base = urlsplit(api_base)
    if base.hostname not in ("slack.com", "www.slack.com"):
        origins.add((base.scheme, base.netloc))
    return origins


class FileRefused(Exception):
    """The file cannot be taken; the message is for the person who gave it."""


class SlackFiles:
    def __init__(self, token: str, api_base: str) -> None:
        self.token = token
        self.origins = file_origins(api_base)

    def check(self, file: Mapping[str, Any]) -> str:
        """The file's ``url_private``, when it is on a host the token may go to."""
        url = str(file.get("url_private") or "")
        parts = urlsplit(url)
        if (parts.scheme, parts.netloc) not in self.origins:
            raise FileRefused(f"{_name(file)} is not a file clusterbot can read from Slack")
        if int(file.get("size") or 0) > MAX_SCRIPT_BYTES:
            raise FileRefused(f"{_name(file)} is over {MAX_SCRIPT_BYTES // 1024} KiB")
        return url

    async def text(self, session: aiohttp.ClientSession, file: Mapping[str, Any]) -> str:
        url = self.check(file)
        headers = {"Authorization": f"Bearer {self.token}"}
        async with session.get(
            url, headers=headers, timeout=FILE_TIMEOUT, allow_redirects=False
        ) as reply:
            # without a valid token Slack answers its sign-in page, not the file
            if reply.status != 200 or reply.content_type == "text/html":
                raise FileRefused(f"{_name(file)} could not be read (HTTP {reply.status})")
            data = bytearray()
            async for chunk in reply.content.iter_chunked(CHUNK):
                data += chunk
                if len(data) > MAX_SCRIPT_BYTES:  # the declared size is the payload's word
                    raise FileRefused(f"{_name(file)} is over {MAX_SCRIPT_BYTES // 1024} KiB")
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise FileRefused(f"{_name(file)} is not text") from None


def _name(file: Mapping[str, Any]) -> str:
    return str(file.get("name") or "the file")[:80]
