"""One entrance for everything a person asks: a command's text or a click's action in, one
answer out. Who may do what is decided here, once, from the registry's roles
(``handlers.commands``) and the actions' (below); the platform adapter only decodes, hands
over and delivers."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.vertex.errors import VertexError
from handlers.actions import (
    Action,
    ActionError,
    AuditPage,
    Decide,
    Keep,
    OpenForm,
    Remedy,
    RestoreClicked,
    Snooze,
    SweepNow,
    Unsnooze,
    Withdraw,
    decode,
)
from handlers.approvals import Approvals
from handlers.audit_view import Audit
from handlers.clusters import error_text
from handlers.commands import BY_NAME, Caller, Subcommand, lookup
from handlers.grammar import USAGE, CommandError
from handlers.idle_clicks import IdleClicks
from handlers.policy import Policy, Role
from handlers.ports import RoleSource
from handlers.replies import ChannelRef, Line, Reply, error_reply, joined, notice
from handlers.reports import NO_IDLE, Reports

# The least role each kind of click needs; finer rules (self-approval, who approves deletes,
# only the requester withdraws) are the approval flow's.
ACTION_ROLES: dict[type, tuple[Role, str]] = {
    Decide: (Role.VIEWER, "Deciding requests"),
    Withdraw: (Role.VIEWER, "Withdrawing a request"),
    Remedy: (Role.OPERATOR, "Acting on idle alerts"),
    Snooze: (Role.OPERATOR, "Acting on idle alerts"),
    Unsnooze: (Role.OPERATOR, "Acting on idle alerts"),
    Keep: (Role.OPERATOR, "Acting on idle alerts"),
    SweepNow: (Role.VIEWER, "Sweeping"),
    RestoreClicked: (Role.OPERATOR, "Restoring a deleted cluster"),
    OpenForm: (Role.VIEWER, "Opening a form"),
    AuditPage: (Role.VIEWER, "Reading the audit log"),
}


class Outcome(StrEnum):
    """How a command or click went, for the metrics."""

    OK = "ok"
    DENIED = "denied"
    BAD_INPUT = "bad_input"
    UPSTREAM_ERROR = "upstream_error"
    INTERNAL_ERROR = "internal_error"


@dataclass
class Answer:
    """What to say, to whom, and how it went (for the metrics)."""

    reply: Reply | None  # None: the answer was posted in the channel (an approval card)
    name: str = "unknown"  # the subcommand or action, for metrics
    outcome: Outcome = Outcome.OK
    public: bool = False
    replace_original: bool | None = None  # a click's answer replaces the message clicked
    reason: str | None = None  # why it was refused or failed, in one line (for a form's field)


@dataclass
class Core:
    """The services the commands run on (``handlers.commands.CommandServices``)."""

    reports: Reports
    approvals: Approvals


class Dispatcher:
    def __init__(
        self,
        core: Core,
        policy: Policy,
        roles: RoleSource,
        clicks: IdleClicks | None = None,
    ) -> None:
        self.core = core
        self.policy = policy
        self.roles = roles
        self.clicks = clicks

    async def command(self, user: str, channel: str, text: str) -> Answer:
        """The one answer to ``/cluster TEXT``."""
        answer = await self._command(user, channel, text, instant=False)
        assert answer is not None
        return answer

    async def instant(self, user: str, channel: str, text: str) -> Answer | None:
        """The answer when it needs nothing but what is at hand (help, a usage error, a
        refusal by channel or role), so it can go back with the ack; None when it needs
        the control plane, the store or Slack, and ``command`` must give it."""
        return await self._command(user, channel, text, instant=True)

    async def _command(self, user: str, channel: str, text: str, *, instant: bool) -> Answer | None:
        name = (text.split() or ["help"])[0].lower()
        name = name if name in USAGE else "unknown"
        try:
            entry, command = lookup(text)
        except CommandError as error:
            name = error.subcommand or name
            return Answer(error_reply(error.reason, error.usage), name, Outcome.BAD_INPUT)
        return await self._run(entry, command, user, channel, instant=instant)

    async def submit(self, user: str, channel: str, name: str, command: Any) -> Answer:
        """The answer to a filled-in form: the same checks and the same run as the typed
        command it stands for (``name`` is its subcommand)."""
        answer = await self._run(BY_NAME[name], command, user, channel, instant=False)
        assert answer is not None
        return answer

    async def refusal(self, user: str, channel: str, name: str, needed: Role) -> Answer | None:
        """Why ``user`` may not ask subcommand ``name`` for what needs role ``needed`` here,
        so a form is not opened for nothing; None when they may."""
        refusal, _role = await self._allowed(BY_NAME[name], needed, user, channel, instant=False)
        return refusal

    async def _allowed(
        self, entry: Subcommand[Any], needed: Role, user: str, channel: str, *, instant: bool
    ) -> tuple[Answer | None, Role | None]:
        """A refusal by channel or role (None when allowed), and the caller's role (None when
        an instant answer does not have it at hand)."""
        name = entry.name
        if not self.policy.channel_allowed(channel):
            allowed: Line = joined([ChannelRef(c) for c in self.policy.channels])
            refusal = notice(
                "clusterbot is not enabled in this channel",
                "clusterbot is not enabled in this channel; use ",
                *allowed,
                ".",
            )
            return Answer(refusal, name, Outcome.DENIED), None
        role = self.roles.known(user) if instant else await self.roles.of(user)
        if role is None or role >= needed:
            return None, role
        reason = (
            f"/cluster {name} needs the {needed.label} role; you are {role.label}. "
            "An admin can grant it in the policy file."
        )
        return Answer(error_reply(reason), name, Outcome.DENIED, reason=reason), role

    async def _run(
        self, entry: Subcommand[Any], command: Any, user: str, channel: str, *, instant: bool
    ) -> Answer | None:
        name = entry.name
        try:
            needed = entry.needed(command)
            refusal, role = await self._allowed(entry, needed, user, channel, instant=instant)
            if refusal is not None:
                return refusal
            if role is None or (instant and not entry.instant):
                return None
            reply = await entry.run(self.core, command, Caller(user, channel, role))
            return Answer(reply, name, public=reply.public if reply else False)
        except CommandError as error:
            name = error.subcommand or name
            reply = error_reply(error.reason, error.usage)
            return Answer(reply, name, Outcome.BAD_INPUT, reason=error.reason)
        except VertexError as error:
            reason = error_text(error, f"run /cluster {name}")
            return Answer(error_reply(reason), name, Outcome.UPSTREAM_ERROR, reason=reason)

    async def click(
        self,
        user: str,
        action_id: str,
        value: str,
        card_ts: str | None,
        channel: str | None = None,
    ) -> Answer:
        """The answer to a button or menu click, shown to the clicker alone."""
        try:
            action = decode(action_id, value)
        except ActionError as error:
            return Answer(notice("Not understood", str(error)), action_id, Outcome.BAD_INPUT)
        role = await self.roles.of(user)
        needed, doing = ACTION_ROLES[type(action)]
        if role < needed:
            refusal = f"{doing} needs the {needed.label} role; you are {role.label}."
            return Answer(
                notice("Not allowed", refusal), action_id, Outcome.DENIED, replace_original=False
            )
        if isinstance(action, Remedy | Snooze | Unsnooze | Keep):
            try:  # a button names its cluster in its value: the boundary holds for it too
                self.core.approvals.directory.confine(action.cluster)
            except CommandError as error:
                return Answer(
                    notice("Not allowed", error.reason),
                    action_id,
                    Outcome.DENIED,
                    replace_original=False,
                )
        reply = await self._act(action, user, role, card_ts, channel)
        # a new report or page takes the place of the one clicked
        in_place = isinstance(action, SweepNow) or (
            isinstance(action, AuditPage) and not action.csv
        )
        return Answer(reply, action_id, replace_original=in_place)

    async def _act(
        self, action: Action, user: str, role: Role, card_ts: str | None, channel: str | None
    ) -> Reply | None:
        approvals = self.core.approvals
        if isinstance(action, Decide):
            return await approvals.decide(user, role, action.request_id, action.approve, card_ts)
        if isinstance(action, Withdraw):
            return await approvals.withdraw(user, action.request_id, card_ts)
        if isinstance(action, SweepNow):
            return await self.core.reports.sweep_now()
        if isinstance(action, AuditPage):
            query = Audit(action.cluster, action.by, action.since, action.before)
            if action.csv:
                return await self.core.reports.audit_csv(query, channel or "", user)
            return await self.core.reports.audit(query)
        if isinstance(action, RestoreClicked):
            return await approvals.restore_clicked(user, action.request_id)
        if isinstance(action, OpenForm):  # where forms cannot open, the command does it
            return notice("Form", f"Type /cluster {action.kind} with its words instead.")
        if self.clicks is None:
            return notice("Idle report", NO_IDLE)
        if isinstance(action, Remedy):
            return await self.clicks.remedy(user, role, action)
        if isinstance(action, Snooze):
            return await self.clicks.snooze(user, action)
        if isinstance(action, Unsnooze):
            return await self.clicks.unsnooze(user, action)
        return await self.clicks.keep(user, action)
