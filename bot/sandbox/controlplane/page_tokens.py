"""Page tokens as the API gives them: opaque, tied to the list they page and checked, so that
a token from another list, or made up, is refused as INVALID_ARGUMENT (AIP-158)."""

from __future__ import annotations

import base64
import hashlib
import json

from bot.sandbox.controlplane import rpc


def encode(secret: bytes, parent: str, offset: int) -> str:
    payload = json.dumps({"p": parent, "o": offset}, separators=(",", ":")).encode()
    check = hashlib.sha256(payload + secret).hexdigest()[:16]
    return base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + check


def decode(secret: bytes, parent: str, token: str) -> int:
    if not token:
        return 0
    try:
        encoded, check = token.rsplit(".", 1)
        payload = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        if hashlib.sha256(payload + secret).hexdigest()[:16] != check:
            raise ValueError("checksum")
        document = json.loads(payload)
        if document["p"] != parent:
            raise ValueError("parent")
        return int(document["o"])
    except (ValueError, KeyError, TypeError):
        raise rpc.invalid(
            "Invalid page_token: it does not come from a previous list call."
        ) from None


def page_size(asked: str, most: int) -> int:
    """A list's ``pageSize``: unset or 0 is the most a page holds, as is more than that."""
    try:
        size = int(asked or "0")
    except ValueError:
        raise rpc.invalid("page_size must be an integer") from None
    if size < 0:
        raise rpc.invalid("page_size must not be negative")
    return min(size or most, most)
