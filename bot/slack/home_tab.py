"""The Home tab in Slack: published when a person opens it (``app_home_opened``), and again
when what it shows has changed.

Every ``REFRESH_SECONDS`` the tab of each person who opened it within ``WATCH_SECONDS`` is
rendered afresh (from one reading of the clusters, operations and requests for all of them)
and published only if it differs from what they have; at most
``PUBLISH_PER_MINUTE`` publishes a minute, under views.publish's Tier 4 (100+ a minute,
https://docs.slack.dev/reference/methods/views.publish). The tab is each person's own view,
so nothing is lost when the process restarts: the next open publishes it again.

An ``app_home_opened`` event is acked at once (Slack retries one not acked in 3 s) and the
tab published after, from the last reading when it is at most ``FRESH_SECONDS`` old, and
otherwise from one reading shared by every open that arrives meanwhile. A tab just opened goes
first: refreshes leave ``OPEN_RESERVE`` publishes a minute to opens, and a tab the budget
could not publish at its open is published first at the next refresh.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.redact import Redactor
from bot.slack.render import render
from handlers.home import Home, Snapshot
from handlers.ports import RoleSource

REFRESH_SECONDS = 30.0
WATCH_SECONDS = 3600.0
PUBLISH_PER_MINUTE = 90  # views.publish is Tier 4, 100+ a minute
OPEN_RESERVE = 30  # of those, left to tabs just opened
FRESH_SECONDS = 10.0  # a reading this recent serves a tab just opened

log = logging.getLogger(__name__)


class HomeTab:
    def __init__(
        self,
        *,
        client: AsyncWebClient,
        home: Home,
        roles: RoleSource,
        redactor: Redactor,
        clock: Callable[[], float] = time.monotonic,
        spawn: Callable[[Coroutine[Any, Any, None]], object] | None = None,
    ) -> None:
        self.client = client
        self.home = home
        self.roles = roles
        self.redactor = redactor
        self.clock = clock
        self.watchers: dict[str, float] = {}  # user -> when they last opened the tab
        self.shown: dict[str, str] = {}  # user -> digest of the view they have
        self._spent: list[float] = []
        self.spawn = spawn or asyncio.ensure_future  # work after the ack (the service's drain)
        self.opening: dict[str, None] = {}  # opened, and not yet published
        self._reading: tuple[float, Snapshot] | None = None
        self._read: asyncio.Future[Snapshot] | None = None

    def register(self, app: AsyncApp) -> None:
        app.event("app_home_opened")(self.opened)

    async def opened(self, event: dict[str, Any]) -> None:
        if event.get("tab", "home") != "home":
            return
        user = str(event.get("user"))
        self.watchers[user] = self.clock()
        self.shown.pop(user, None)  # publish now, whatever was shown before
        self.opening[user] = None
        self.spawn(self._publish_opened(user))  # the ack goes now; listing may take seconds

    async def _publish_opened(self, user: str) -> None:
        try:
            snapshot = await self.snapshot(FRESH_SECONDS)
        except Exception:  # the next refresh tries again: the tab is still owed
            log.exception("home tab of %s: the clusters could not be read", user)
            return
        if user in self.opening and await self.publish(user, snapshot):
            self.opening.pop(user, None)

    async def snapshot(self, fresh_for: float = 0.0) -> Snapshot:
        """The last reading when it is at most ``fresh_for`` seconds old, else a new one,
        shared by everyone who asks while it is being read."""
        if self._reading is not None and self.clock() - self._reading[0] <= fresh_for:
            return self._reading[1]
        if self._read is None or self._read.done():
            self._read = asyncio.ensure_future(self._take_reading())
        return await asyncio.shield(self._read)

    async def _take_reading(self) -> Snapshot:
        snapshot = await self.home.snapshot()
        self._reading = (self.clock(), snapshot)
        return snapshot

    async def publish(self, user: str, snapshot: Snapshot, reserve: int = 0) -> bool:
        """Publish the user's tab if it changed; False when it did not need to (or could
        not, within the budget less ``reserve``)."""
        reply = self.home.view(user, await self.roles.of(user), snapshot)
        _text, blocks = render(reply, self.redactor)
        view = {"type": "home", "blocks": blocks}
        digest = hashlib.sha256(json.dumps(view, sort_keys=True).encode()).hexdigest()
        if self.shown.get(user) == digest:
            return False
        now = self.clock()
        self._spent = [t for t in self._spent if now - t < 60]
        if len(self._spent) >= PUBLISH_PER_MINUTE - reserve:
            return False  # the next refresh tries again
        self._spent.append(now)
        try:
            await self.client.views_publish(user_id=user, view=view)
        except SlackApiError as error:
            messages = (error.response.get("response_metadata") or {}).get("messages") or []
            log.warning(
                "home tab of %s not published: %s %s", user, error.response.get("error"), messages
            )
            return False
        self.shown[user] = digest
        return True

    async def refresh(self) -> int:
        """Publish again every watched tab that changed; returns how many were published."""
        now = self.clock()
        for user in [u for u, at in self.watchers.items() if now - at > WATCH_SECONDS]:
            del self.watchers[user]
            self.shown.pop(user, None)
        if not self.watchers:
            return 0
        snapshot = await self.snapshot()  # the clusters are listed once for every tab
        published = 0
        for user in list(self.opening):  # tabs just opened go first
            if await self.publish(user, snapshot):
                self.opening.pop(user, None)
                published += 1
        for user in [u for u in self.watchers if u not in self.opening]:
            published += await self.publish(user, snapshot, reserve=OPEN_RESERVE)
        return published
