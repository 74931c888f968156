"""Secrets never leave the process: not in a log line, not in anything shown to a person.

One ``Redactor`` holds the configured secret values (tokens, the signing secret, the database
password) and replaces them, and anything shaped like a credential, wherever text goes out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from handlers.domain.errors import has_markers, redact_patterns, scrub


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self.secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)
        # as they appear in JSON text (a password may hold a quote or a backslash)
        self._in_json = [json.dumps(s, ensure_ascii=False)[1:-1] for s in self.secrets]

    def clean(self, text: str, limit: int = 100_000) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return scrub(text, limit=limit) if limit else text

    def clean_text(self, text: str) -> str:
        """Secrets out of text meant for a person, keeping its layout (line breaks)."""
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return redact_patterns(text)

    def clean_blocks(self, value: Any) -> Any:
        """Every string in a Block Kit structure, cleaned. Most replies hold nothing to clean:
        one look at their JSON text says so, and they are returned as they are."""
        whole = json.dumps(value, ensure_ascii=False)
        if not any(secret in whole for secret in self._in_json) and not has_markers(whole):
            return value
        return self._clean(value)

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.clean_text(value)
        if isinstance(value, list):
            return [self._clean(v) for v in value]
        if isinstance(value, dict):
            return {k: self._clean(v) for k, v in value.items()}
        return value
