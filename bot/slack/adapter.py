"""The Slack adapter: everything the service says to Slack and hears from it.

The composition root (``bot/app.py``) asks it first for what the core is built on (the
messenger, the people, the user-group roles), builds the core, and hands the core back. The
adapter then owns Bolt and its listeners, the forms (modals), the Home tab and the request
URL. A second chat platform would be a package with a class of this shape beside it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp

from bot.jobs import PeriodicJobs
from bot.platform import ChatPlatform, CommandObserver
from bot.redact import Redactor
from bot.settings import Settings
from bot.slack.budget import Budget, Pacer
from bot.slack.failures import Failures
from bot.slack.home_tab import REFRESH_SECONDS, HomeTab
from bot.slack.listeners import Background, SlackEdge
from bot.slack.messenger import LogMessenger, SlackMessenger, web_client
from bot.slack.modals import Modals
from bot.slack.people import SLACK_PEOPLE
from bot.slack.request_url import RequestUrl
from bot.slack.responder import Responder
from bot.slack.roles import Roles
from handlers.forms.choices import Forms
from handlers.home import Home
from handlers.policy import Policy

if TYPE_CHECKING:
    from handlers.services import Services

log = logging.getLogger(__name__)


class SlackAdapter:
    def __init__(self, settings: Settings, policy: Policy, redactor: Redactor) -> None:
        secret = settings.slack_bot_token
        token = secret.get_secret_value() if secret is not None else None
        self.settings = settings
        self.redactor = redactor
        budget = Budget()  # one Slack budget: what the messenger spends, a 429 pauses
        self.client = web_client(
            token or "", settings.slack_api_url, budget, timeout=settings.slack_timeout
        )
        # Without a bot token (a cron sweep) nothing is posted: the messages go to the log.
        self.messenger: SlackMessenger | LogMessenger = (
            SlackMessenger(self.client, redactor, Pacer(budget)) if token else LogMessenger()
        )
        self.connected = token is not None
        self.roles = Roles(policy, self.client)
        self.people = SLACK_PEOPLE
        self.responder = Responder(redactor)
        self.background = Background()  # listeners' work after their ack
        self.bolt: AsyncApp | None = None
        self.home_tab: HomeTab | None = None
        self.socket_mode: Any = None  # Bolt's Socket Mode handler, while connected

    @property
    def alert_channel(self) -> str | None:
        """Where the core posts its alerts: nowhere without a bot token."""
        return self.settings.alert_channel if self.connected else None

    def attach(
        self,
        core: Services,
        home: Home,
        on_command: CommandObserver,
        *,
        working_after: float | None = None,
    ) -> None:
        """Given the core, build what Slack's requests reach: the Home tab, and with a bot
        token the Bolt app and its listeners."""
        self.home_tab = HomeTab(
            client=self.client,
            home=home,
            roles=self.roles,
            redactor=self.redactor,
            spawn=self.background.spawn,
        )
        if self.connected:
            self.bolt = self._bolt(core, on_command, working_after)

    def _bolt(
        self, core: Services, on_command: CommandObserver, working_after: float | None
    ) -> AsyncApp:
        """The Bolt app and its listeners. Requests are verified before they reach Bolt
        (``bot/slack/request_url.py``)."""
        bolt_log = logging.getLogger("clusterbot.bolt")
        # Bolt also reads SLACK_BOT_TOKEN itself and warns that the client's (the same) wins.
        bolt_log.addFilter(lambda record: "will be unused" not in record.getMessage())
        app = AsyncApp(
            client=self.client,
            signing_secret="unused: verified before dispatch",
            request_verification_enabled=False,
            # the listeners ack and hand over at once: Bolt need not run them in a task of
            # its own and poll for the ack every 10 ms (its default)
            process_before_response=True,
            logger=bolt_log,
        )
        extra = {} if working_after is None else {"working_after": working_after}
        failures = Failures(self.responder, on_command)
        app.error(failures.bolt)  # what a listener raises before its ack
        assert core.intake is not None  # built with the store's submissions
        modals = Modals(
            app=app,
            client=self.client,
            dispatcher=core.dispatcher,
            forms=Forms(core.directory, core.approvals.prices),
            background=self.background,
            responder=self.responder,
            intake=core.intake,
            failures=failures,
            home_channel=self.settings.alert_channel,
        )
        # Bolt tries listeners in the order they were added, each matcher at the cost of
        # building its arguments: the slash command, most of what arrives, is tried first.
        SlackEdge(
            app,
            core.dispatcher,
            self.background,
            self.responder,
            failures=failures,
            on_command=on_command,
            open_form=modals.open,
            open_form_clicked=modals.open_clicked,
            **extra,
        ).register()
        modals.register()
        assert self.home_tab is not None
        self.home_tab.register(app)
        return app

    def use(self, session: aiohttp.ClientSession) -> None:
        """Call Slack (Web API and response_url replies) over the service's pooled session."""
        self.client.session = session
        self.responder.session = session

    def install(
        self,
        app: web.Application,
        path: str,
        accepting: Callable[[], bool],
        acked: Callable[[float], None],
    ) -> None:
        """The request URL, served only with a signing secret: unsigned requests never reach
        the listeners (Socket Mode needs no request URL)."""
        secret = self.settings.slack_signing_secret
        if secret is not None and self.bolt is not None:
            url = RequestUrl(self.bolt, secret.get_secret_value(), accepting, acked)
            app.router.add_post(path, url.handle)

    def schedule(self, jobs: PeriodicJobs, accepting: Callable[[], bool]) -> None:
        """The adapter's periodic work: the Home tabs people have open, refreshed."""
        home_tab = self.home_tab
        if self.bolt is None or home_tab is None:
            return

        async def refresh() -> None:
            if accepting():
                await home_tab.refresh()

        jobs.add("home-tabs", refresh, REFRESH_SECONDS)

    async def connect(self, host: str, port: int) -> None:
        """In Socket Mode (an app-level token), open the WebSocket Slack sends events over;
        over HTTP, the request URL (``install``) is all there is."""
        token = self.settings.slack_app_token
        if token is None:
            log.info("listening for Slack on %s:%d at /slack/events", host, port)
            return
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        assert self.bolt is not None  # serve requires SLACK_BOT_TOKEN
        self.socket_mode = AsyncSocketModeHandler(self.bolt, token.get_secret_value())
        await self.socket_mode.connect_async()
        log.info("connected to Slack in Socket Mode; health on %s:%d", host, port)

    async def disconnect(self) -> None:
        if self.socket_mode is not None:
            await self.socket_mode.close_async()
            self.socket_mode = None

    async def drain(self, limit: float) -> int:
        """Let the listeners' work finish for ``limit`` seconds; how many were cancelled."""
        return await self.background.drain(limit)

    async def close(self) -> None:
        await self.responder.close()


def _shaped(adapter: SlackAdapter) -> ChatPlatform:
    return adapter  # the type checker holds Slack's adapter to the platform's shape
