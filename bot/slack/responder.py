"""Replies through a ``response_url``, keeping Slack's rules for it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from bot.redact import Redactor
from bot.slack.render import render
from handlers.replies import FixedReply, Reply

log = logging.getLogger(__name__)


RESPONSE_URL_USES = 5  # a response_url takes 5 replies in 30 minutes
RESPONSE_URL_LIFETIME = (
    30 * 60.0
)  # (https://api.slack.com/interactivity/handling#message_responses)


class Responder:
    """Replies to a ``response_url`` over the service's pooled HTTP session, keeping Slack's
    rules for it: 5 uses in 30 minutes (a command uses at most two: "Working on it…" and
    the reply)."""

    def __init__(
        self,
        redactor: Redactor,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.redactor = redactor
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.clock = clock
        self.session: aiohttp.ClientSession | None = None  # shared; set when the service starts
        self._own: aiohttp.ClientSession | None = None
        self._uses: dict[str, tuple[float, int]] = {}
        self._fixed: dict[int, tuple[Reply, tuple[str, list[dict[str, Any]]]]] = {}

    def _spend(self, url: str) -> bool:
        """Count a use of ``url``; False once it has had its 5 uses or its 30 minutes."""
        now = self.clock()
        # URLs are kept in the order of their first use, so the oldest are at the front; one
        # expired a while ago is forgotten (Slack itself refuses it by then)
        while self._uses:
            oldest = next(iter(self._uses))
            if now - self._uses[oldest][0] < 2 * RESPONSE_URL_LIFETIME:
                break
            del self._uses[oldest]
        first, count = self._uses.get(url, (now, 0))
        if count >= RESPONSE_URL_USES or now - first >= RESPONSE_URL_LIFETIME:
            return False
        self._uses[url] = (first, count + 1)
        return True

    def message(self, reply: Reply, *, public: bool = False) -> dict[str, Any]:
        """A reply as Slack takes it in a ``response_url`` post or in an ack's body."""
        if isinstance(reply, FixedReply):  # rendered once: the help, asked most of all
            kept = self._fixed.get(id(reply))
            if kept is None or kept[0] is not reply:
                kept = self._fixed[id(reply)] = (reply, render(reply, self.redactor))
            text, blocks = kept[1]
        else:
            text, blocks = render(reply, self.redactor)
        return {
            "text": text,
            "blocks": blocks,
            "response_type": "in_channel" if public else "ephemeral",
        }

    async def send(
        self,
        url: str,
        reply: Reply,
        *,
        public: bool = False,
        replace_original: bool | None = None,
    ) -> None:
        body = self.message(reply, public=public)
        if replace_original is not None:
            body["replace_original"] = replace_original
        if not self._spend(url):
            log.warning("a reply was not sent: its response_url has had its 5 uses or 30 minutes")
            return
        session = self.session
        if session is None or session.closed:
            if self._own is None:
                self._own = aiohttp.ClientSession()
            session = self._own
        try:
            async with session.post(url, json=body, timeout=self.timeout) as answer:
                if answer.status >= 400:
                    log.warning("response_url refused a reply: HTTP %d", answer.status)
        except (aiohttp.ClientError, TimeoutError) as error:
            log.warning("could not reply through response_url: %s", type(error).__name__)

    async def close(self) -> None:
        if self._own is not None:
            await self._own.close()
            self._own = None
