"""The stand-in's Web API error, shared by the workspace and its views."""

from __future__ import annotations

from typing import Any


class SlackError(Exception):
    """A Web API error: ``{"ok": false, "error": code}``, with details where Slack gives them."""

    def __init__(self, code: str, *, status: int = 200, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.status = status
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"ok": False, "error": self.code, **self.extra}


def require_scope(granted: set[str], scope: str) -> None:
    """Slack's answer to a token without the scope: ``missing_scope``, with what was needed
    and what the token has (https://docs.slack.dev/authentication/tokens, and each method's
    "Errors")."""
    if scope not in granted:
        raise SlackError("missing_scope", needed=scope, provided=",".join(sorted(granted)))
