"""Every capability's declarations folded into one registry: the subcommands by name, in the
order the capabilities and their declarations come, and the clicks by action id; two
subcommands of one name, or two clicks of one action id, are refused. Help, typo
suggestions, the dispatcher's role checks and the platform's listeners all read it."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from handlers.actions import Action, ActionError, ActionId, open_form
from handlers.capability import Capability, Port
from handlers.changes.kind import ChangeKind
from handlers.changes.kinds import read_plan
from handlers.changes.plan import ChangePlan
from handlers.clicking import Click, click
from handlers.commanding import Subcommand
from handlers.errors import UserError
from handlers.forms.spec import FormKindSpec
from handlers.grammar import CommandError, echo
from handlers.keeping import RecordKind
from handlers.policy import Policy, Role, Section
from handlers.replies import Reply, notice
from handlers.sweep.gpus import GPU_IDLE
from handlers.sweep.state import IDLE_RECORD, IDLE_RULES

ALIASES = {"-h": "help", "--help": "help", "?": "help"}


class Registry:
    def __init__(self, capabilities: Sequence[Capability[Any]]) -> None:
        self.capabilities = tuple(capabilities)
        self.by_name: dict[str, Subcommand[Any]] = {}
        self.owner: dict[str, str] = {}  # a subcommand's or an action id's capability
        self.clicks: dict[str, Click] = {}
        self.kinds: dict[str, ChangeKind[Any]] = {}
        self.forms: dict[str, FormKindSpec] = {}
        # the sweep's own record and table (the idle definition) are the core's; each
        # capability adds its own beside them
        self.records: dict[str, RecordKind[Any]] = {IDLE_RECORD.owner: IDLE_RECORD}
        self.sections: dict[str, Section[Any]] = {s.name: s for s in (IDLE_RULES, GPU_IDLE)}
        self.ports: dict[str, Port[Any]] = {}  # what the capabilities need from the shell
        names = [c.name for c in self.capabilities]
        if len(names) != len(set(names)):
            raise ValueError(f"two capabilities of one name among {', '.join(names)}")
        for capability in self.capabilities:
            for entry in capability.commands:
                if entry.name in self.by_name:
                    raise ValueError(f"two subcommands are called {entry.name}")
                self.by_name[entry.name] = entry
                self.owner[entry.name] = capability.name
            for kind in capability.kinds:
                if kind.name in self.kinds:
                    raise ValueError(f"two kinds of change are called {kind.name}")
                self.kinds[kind.name] = kind
            for port in capability.ports:
                if self.ports.setdefault(port.name, port) != port:
                    raise ValueError(f"two ports are called {port.name}")
            for section in capability.policy:
                if section.name in self.sections or section.name in Policy.model_fields:
                    raise ValueError(f"two tables of the policy are called {section.name}")
                self.sections[section.name] = section
            for record in capability.records:
                if record.owner in self.records:
                    raise ValueError(f"two records are kept by the name {record.owner}")
                self.records[record.owner] = record
            for spec in capability.forms:
                if spec.kind in self.forms:
                    raise ValueError(f"two forms are of the kind {spec.kind}")
                self.forms[spec.kind] = spec
            for declared in (*capability.clicks, *_openers(capability.forms)):
                for action_id in declared.ids:
                    if action_id in self.clicks:
                        raise ValueError(f"two clicks answer the action id {action_id}")
                    self.clicks[action_id] = declared
                    self.owner[action_id] = capability.name
        unanswered = sorted(set(ActionId) - set(self.clicks))
        if unanswered:
            raise ValueError(f"no click answers {', '.join(unanswered)}")

    @property
    def commands(self) -> tuple[Subcommand[Any], ...]:
        return tuple(self.by_name.values())

    def entry_for(self, word: str) -> Subcommand[Any]:
        """The subcommand a word names; raise ``CommandError``, with the nearest subcommand
        for a typo, when none."""
        entry = self.by_name.get(ALIASES.get(word.lower(), word.lower()))
        if entry is None:
            close = difflib.get_close_matches(word.lower(), list(self.by_name), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise CommandError(f"there is no subcommand {echo(word)}{hint}")
        return entry

    def last_field(self, kind: str) -> str:
        """Where a problem that belongs to no field of a form is shown: its last field."""
        spec = self.forms.get(kind)
        return "cluster" if spec is None else spec.last

    def read_plan(self, text: str | bytes) -> ChangePlan[Any]:
        """A stored plan, its detail read as the model of its kind."""
        return read_plan(text, self.kinds.values())

    def usage(self, error: UserError) -> str | None:
        """The usage a bad-input answer quotes: its subcommand's, or every subcommand's."""
        if not isinstance(error, CommandError) or not error.shows_usage:
            return None
        entry = self.by_name.get(error.subcommand or "")
        if entry is not None:
            return f"Usage: {entry.usage}"
        return "Usage: /cluster " + " | ".join(self.by_name) + "   (/cluster help for more)"

    def provided(self, store: object, **others: object) -> dict[str, object]:
        """What the shell provides the declared ports as: those it names in ``others``, and
        every other whose Protocol its ``store`` meets (a new capability's store port is
        provided by the store that implements it, with no list to edit)."""
        unknown = sorted(set(others) - set(self.ports))
        if unknown:  # a provision no capability asks for is a port someone forgot to declare
            raise ValueError(f"no capability declares the port {', '.join(unknown)}")
        provided = dict(others)
        for name, port in self.ports.items():
            if name not in provided and isinstance(store, port.protocol):
                provided[name] = store
        return provided

    def read_click(self, action_id: str, value: str) -> tuple[Click, Action]:
        """The click and its action; ``ActionError`` for anything this bot never offered."""
        found = self.clicks.get(action_id)
        if found is None:
            raise ActionError(f"clusterbot offers no action {action_id[:40]!r}")
        return found, found.read(action_id, value)


async def _typed(kind: str) -> Reply:
    return notice("Form", f"Type /cluster {kind} with its words instead.")


def _openers(forms: Sequence[FormKindSpec]) -> tuple[Click, ...]:
    """The button that opens each form a button may open (``clickable``): where the
    platform has forms, it opens the form on the click; where it has none, the click says
    which command to type."""
    return tuple(
        click(
            (f"open_form_{spec.kind}",),
            open_form,
            Role.VIEWER,
            "Opening a form",
            lambda s, c: _typed(c.action.kind),
        )
        for spec in forms
        if spec.clickable
    )
