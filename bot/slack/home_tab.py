"""The Home tab in Slack: published when a person opens it (``app_home_opened``), and again
when what it shows has changed.

Every ``REFRESH_SECONDS`` the tab of each person who opened it within ``WATCH_SECONDS`` is
rendered afresh (from one reading of the clusters, operations and requests for all of them)
and published only if it differs from what they have; at most
``PUBLISH_PER_MINUTE`` publishes a minute, under views.publish's Tier 4 (100+ a minute,
https://docs.slack.dev/reference/methods/views.publish). The tab is each person's own view,
so nothing is lost when the process restarts: the next open publishes it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
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
PUBLISH_PER_MINUTE = 50

log = logging.getLogger(__name__)


class HomeTab:
    def __init__(
        self,
        client: AsyncWebClient,
        home: Home,
        roles: RoleSource,
        redactor: Redactor,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.home = home
        self.roles = roles
        self.redactor = redactor
        self.clock = clock
        self.watchers: dict[str, float] = {}  # user -> when they last opened the tab
        self.shown: dict[str, str] = {}  # user -> digest of the view they have
        self._spent: list[float] = []

    def register(self, app: AsyncApp) -> None:
        app.event("app_home_opened")(self.opened)

    async def opened(self, event: dict[str, Any]) -> None:
        if event.get("tab", "home") != "home":
            return
        user = str(event.get("user"))
        self.watchers[user] = self.clock()
        self.shown.pop(user, None)  # publish now, whatever was shown before
        await self.publish(user, await self.home.snapshot())

    async def publish(self, user: str, snapshot: Snapshot) -> bool:
        """Publish the user's tab if it changed; False when it did not need to (or could
        not, within the budget)."""
        reply = self.home.view(user, await self.roles.of(user), snapshot)
        _text, blocks = render(reply, self.redactor)
        view = {"type": "home", "blocks": blocks}
        digest = hashlib.sha256(json.dumps(view, sort_keys=True).encode()).hexdigest()
        if self.shown.get(user) == digest:
            return False
        now = self.clock()
        self._spent = [t for t in self._spent if now - t < 60]
        if len(self._spent) >= PUBLISH_PER_MINUTE:
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
        snapshot = await self.home.snapshot()  # the clusters are listed once for every tab
        published = 0
        for user in list(self.watchers):
            published += await self.publish(user, snapshot)
        return published
