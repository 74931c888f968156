"""Files in the Slack stand-in: one a user gave a modal's file input, or one the app shared
with files.uploadV2, as Slack's file object describes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FILE_KINDS = {
    "png": ("image/png", "png"),
    "csv": ("text/csv", "csv"),
    "sh": ("text/x-sh", "shell"),
}


@dataclass
class File:
    """A file a user gave a modal's file input, served at ``url_private`` to the bot token."""

    id: str
    name: str
    content: bytes
    user: str
    created: float

    @property
    def kind(self) -> tuple[str, str]:
        """Its ``mimetype`` and ``filetype`` as Slack's file object names them
        (https://docs.slack.dev/reference/objects/file-object: png, csv, shell, text)."""
        suffix = self.name.rsplit(".", 1)[-1].lower() if "." in self.name else ""
        return FILE_KINDS.get(suffix, ("text/plain", "text"))

    def to_api(self, origin: str) -> dict[str, Any]:
        url = f"{origin}/sandbox/files/{self.id}/{self.name}"
        mimetype, filetype = self.kind
        return {
            "id": self.id,
            "created": int(self.created),
            "name": self.name,
            "title": self.name,
            "mimetype": mimetype,
            "filetype": filetype,
            "user": self.user,
            "size": len(self.content),
            "url_private": url,
            "url_private_download": f"{url}?download=1",
        }
