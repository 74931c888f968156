"""The chat platform, as the composition root holds it: what the core posts through (its
messenger, who people are, their roles, the alert channel), how it is given the core, the
route it serves, its periodic work, and its drain at a stop. Slack's adapter
(``bot/slack/adapter.py``) is the one shipped; a second platform is a package with a class of
this shape and one line in ``PLATFORMS``, chosen by ``CLUSTERBOT_CHAT_PLATFORM``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import aiohttp
    from aiohttp import web

    from bot.jobs import PeriodicJobs
    from bot.redact import Redactor
    from bot.settings import Settings
    from handlers.home import Home
    from handlers.messenger import Messenger
    from handlers.policy import Policy
    from handlers.ports import People, RoleSource
    from handlers.services import Services

# each platform's adapter class, by the name the setting gives: "module:Class"
PLATFORMS: dict[str, str] = {"slack": "bot.slack.adapter:SlackAdapter"}

CommandObserver = Callable[[str, str], None]  # a command's name and outcome, for the metrics


class ChatPlatform(Protocol):
    @property
    def messenger(self) -> Messenger: ...

    @property
    def roles(self) -> RoleSource: ...

    @property
    def people(self) -> People: ...

    @property
    def alert_channel(self) -> str | None: ...

    def attach(
        self,
        core: Services,
        home: Home,
        on_command: CommandObserver,
        *,
        working_after: float | None = None,
    ) -> None:
        """Given the core, build what the platform's requests reach."""

    def use(self, session: aiohttp.ClientSession) -> None:
        """Call the platform over the service's pooled HTTP session."""

    def install(
        self,
        app: web.Application,
        path: str,
        accepting: Callable[[], bool],
        acked: Callable[[float], None],
    ) -> None:
        """Its request URL, on the service's HTTP application."""

    def schedule(self, jobs: PeriodicJobs, accepting: Callable[[], bool]) -> None:
        """Its own periodic work."""

    async def connect(self, host: str, port: int) -> None:
        """Open a connection of its own to the platform, where it has one (Slack's Socket
        Mode); requests that come to the request URL (on ``host``:``port``) need none."""

    async def disconnect(self) -> None:
        """Close that connection at a stop, before the work in flight is drained."""

    async def drain(self, limit: float) -> int:
        """Let its listeners' work finish for ``limit`` seconds; how many were cancelled."""
        ...

    async def close(self) -> None: ...


def chat_platform(settings: Settings, policy: Policy, redactor: Redactor) -> ChatPlatform:
    """The adapter of the platform the settings name."""
    module, _, name = PLATFORMS[settings.chat_platform].partition(":")
    made: ChatPlatform = getattr(importlib.import_module(module), name)(settings, policy, redactor)
    return made
