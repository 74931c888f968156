"""One entrance for everything a person asks: a command's text or a click's action in, one
answer out. Who may do what is decided here, once, from the registry's roles
(``handlers.registry``, every capability's declarations folded) and the actions' (below);
each subcommand and click runs on its own capability's service. The platform adapter only
decodes, hands over and delivers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from handlers.actions import ActionError
from handlers.capabilities import REGISTRY
from handlers.clicking import Clicked
from handlers.commanding import Caller, Subcommand
from handlers.domain.errors import VertexError
from handlers.errors import UserError
from handlers.forms.asks import FormAsk
from handlers.gate import Gate
from handlers.grammar import CommandError, normal
from handlers.policy import Policy, Role
from handlers.ports import RoleSource
from handlers.reading.clusters import ClusterDirectory, error_text
from handlers.registry import Registry
from handlers.replies import ChannelRef, Line, Reply, error_reply, joined, notice


def told(error: UserError, doing: str) -> str:
    """What the person reads of an error meant for them; a control plane's, with what it
    was doing and a hint."""
    return error_text(error, doing) if isinstance(error, VertexError) else error.said


class Outcome(StrEnum):
    """How a command or click went, for the metrics."""

    OK = "ok"
    DENIED = "denied"
    BAD_INPUT = "bad_input"
    UPSTREAM_ERROR = "upstream_error"
    BUSY = "busy"
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


@dataclass(frozen=True)
class Read:
    """A command's text, read once: its subcommand, the typed command or why the words are
    wrong, and the form they open where the platform has forms."""

    name: str  # the subcommand, for the metrics ("unknown" when the words name none)
    entry: Subcommand[Any] | None
    command: Any = None
    error: CommandError | None = None
    form: FormAsk | None = None


def read(text: str, registry: Registry = REGISTRY) -> Read:
    words = normal(text).split()
    if not words:
        words = ["help"]
    try:
        entry = registry.entry_for(words[0])
    except CommandError as error:
        return Read("unknown", None, error=error)
    form = entry.form(words[1:]) if entry.form is not None else None
    try:
        return Read(entry.name, entry, entry.parse(words[1:]), form=form)
    except CommandError as error:
        return Read(error.subcommand or entry.name, entry, error=error, form=form)


class Dispatcher:
    def __init__(
        self,
        services: Mapping[str, Any],
        directory: ClusterDirectory,
        policy: Policy,
        roles: RoleSource,
        *,
        gate: Gate | None = None,
        registry: Registry = REGISTRY,
    ) -> None:
        self.services = services  # each capability's service, by the capability's name
        self.directory = directory
        self.policy = policy
        self.roles = roles
        self.gate = gate or Gate()
        self.registry = registry

    @property
    def action_ids(self) -> tuple[str, ...]:
        """Every action id a click answers: what a platform's listeners subscribe to."""
        return tuple(self.registry.clicks)

    def _service(self, name: str) -> Any:
        return self.services.get(self.registry.owner[name])

    async def command(self, user: str, channel: str, text: str | Read) -> Answer:
        """The one answer to ``/cluster TEXT`` (its words read, or to be read)."""
        answer = await self._command(user, channel, text, instant=False)
        assert answer is not None
        return answer

    async def instant(self, user: str, channel: str, text: str | Read) -> Answer | None:
        """The answer when it needs nothing but what is at hand (help, a usage error, a
        refusal by channel or role), so it can go back with the ack; None when it needs
        the control plane, the store or the platform, and ``command`` must give it."""
        return await self._command(user, channel, text, instant=True)

    async def _command(
        self, user: str, channel: str, text: str | Read, *, instant: bool
    ) -> Answer | None:
        words = read(text, self.registry) if isinstance(text, str) else text
        if words.entry is None or words.error is not None:
            error = words.error or CommandError("unreadable")
            reply = error_reply(error.reason, self.registry.usage(error))
            return Answer(reply, words.name, Outcome.BAD_INPUT)
        return await self._run(words.entry, words.command, user, channel, instant=instant)

    async def submit(self, user: str, channel: str, name: str, command: Any) -> Answer:
        """The answer to a filled-in form: the same checks and the same run as the typed
        command it stands for (``name`` is its subcommand)."""
        answer = await self._run(self.registry.by_name[name], command, user, channel, instant=False)
        assert answer is not None
        return answer

    async def refusal(self, user: str, channel: str, name: str, needed: Role) -> Answer | None:
        """Why ``user`` may not ask subcommand ``name`` for what needs role ``needed`` here,
        so a form is not opened for nothing; None when they may."""
        refusal, _role = await self._allowed(
            self.registry.by_name[name], needed, user, channel, instant=False
        )
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
            async with self.gate.enter(user, name, entry.heavy):
                service = self._service(entry.name)
                reply = await entry.run(service, command, Caller(user, channel, role))
            return Answer(reply, name, public=reply.public if reply else False)
        except UserError as error:
            if isinstance(error, CommandError):
                name = error.subcommand or name
            reason = told(error, f"run /cluster {name}")
            return Answer(
                error_reply(reason, self.registry.usage(error)),
                name,
                Outcome(error.blame),
                reason=reason,
            )

    async def click(
        self,
        user: str,
        action_id: str,
        value: str,
        card_message: str | None,
        channel: str | None = None,
    ) -> Answer:
        """The answer to a button or menu click, shown to the clicker alone."""
        try:
            found, action = self.registry.read_click(action_id, value)
        except ActionError as error:
            return Answer(notice("Not understood", str(error)), action_id, Outcome.BAD_INPUT)
        role = await self.roles.of(user)
        if role < found.role:
            refusal = f"{found.doing} needs the {found.role.label} role; you are {role.label}."
            return Answer(
                notice("Not allowed", refusal), action_id, Outcome.DENIED, replace_original=False
            )
        if found.names_cluster:
            try:  # a button names its cluster in its value: the boundary holds for it too
                self.directory.confine(getattr(action, "cluster", ""))
            except CommandError as error:
                return Answer(
                    notice("Not allowed", error.reason),
                    action_id,
                    Outcome.DENIED,
                    replace_original=False,
                )
        try:
            async with self.gate.enter(user, action_id, heavy=False):
                clicked = Clicked(action, user, role, card_message, channel)
                reply = await found.run(self._service(action_id), clicked)
        except UserError as error:  # a click on what has changed since (a cluster deleted)
            reason = told(error, "act on it")
            return Answer(
                notice("Not done", reason),
                action_id,
                Outcome(error.blame),
                replace_original=False,
                reason=reason,
            )
        return Answer(reply, action_id, replace_original=found.in_place(action))
