"""What a button or menu click asks, as typed actions: one codec writes them onto buttons
and reads them back from clicks, so a card and the code that answers it cannot disagree.

On the wire an action is a platform's action id and a short value (Slack: ``action_id`` and
``value``, at most 2,000 characters): ``approve`` + ``r-1a2b``, ``idle_snooze`` +
``3600|projects/.../cpu01``. Any class with those two attributes is an ``Action``: a
capability may declare its own beside the click that answers it (its ``capability.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from handlers.errors import UserError


class Action(Protocol):
    """What a button carries: the id of the click that answers it, and its value."""

    @property
    def action_id(self) -> str: ...

    @property
    def value(self) -> str: ...


class ActionError(UserError, ValueError):
    """A click this bot never offered, or one whose value it cannot read."""


class ActionId(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    WITHDRAW = "withdraw"
    SCALE_TO_ZERO = "idle_scale_to_zero"
    DELETE = "idle_delete"
    SNOOZE = "idle_snooze"
    UNSNOOZE = "idle_unsnooze"
    KEEP = "idle_keep"
    UNKEEP = "idle_unkeep"
    SWEEP_NOW = "idle_sweep_now"
    RESTORE = "restore"
    AUDIT_PAGE = "audit_older"
    AUDIT_CSV = "audit_csv"
    HEALTH_SWEEP_NOW = "health_sweep_now"


@dataclass(frozen=True)
class Decide:
    """Approve or reject a request (approvers)."""

    request_id: str
    approve: bool

    @property
    def action_id(self) -> ActionId:
        return ActionId.APPROVE if self.approve else ActionId.REJECT

    @property
    def value(self) -> str:
        return self.request_id


@dataclass(frozen=True)
class Withdraw:
    """The requester takes their own request back."""

    request_id: str
    action_id = ActionId.WITHDRAW

    @property
    def value(self) -> str:
        return self.request_id


@dataclass(frozen=True)
class Remedy:
    """Scale an idle cluster to zero, or ask to delete it."""

    cluster: str  # full resource name
    delete: bool = False

    @property
    def action_id(self) -> ActionId:
        return ActionId.DELETE if self.delete else ActionId.SCALE_TO_ZERO

    @property
    def value(self) -> str:
        return self.cluster


@dataclass(frozen=True)
class Snooze:
    cluster: str
    seconds: int
    action_id = ActionId.SNOOZE

    @property
    def value(self) -> str:
        return f"{self.seconds}|{self.cluster}"


@dataclass(frozen=True)
class Unsnooze:
    """Watch a snoozed cluster again now."""

    cluster: str
    action_id = ActionId.UNSNOOZE

    @property
    def value(self) -> str:
        return self.cluster


@dataclass(frozen=True)
class Keep:
    """Exempt a cluster from idle alerts (``keep=True``), or watch it again."""

    cluster: str
    keep: bool = True

    @property
    def action_id(self) -> ActionId:
        return ActionId.KEEP if self.keep else ActionId.UNKEEP

    @property
    def value(self) -> str:
        return self.cluster


@dataclass(frozen=True)
class RestoreClicked:
    """Create again the cluster a finished delete request removed (its kept spec)."""

    request_id: str  # the delete request
    action_id = ActionId.RESTORE

    @property
    def value(self) -> str:
        return self.request_id


@dataclass(frozen=True)
class OpenForm:
    """Open a form of a kind a button may open (its spec is ``clickable``), as the command
    with its words missing does; the platform adapter opens it, since a form needs the
    click's own trigger. Its action id is answered by the registry (``handlers.registry``)."""

    kind: str
    cluster: str | None = None  # the cluster the form opens on (a digest's opportunity)

    @property
    def action_id(self) -> str:
        # action ids are unique within a block, so each form has its own
        return f"open_form_{self.kind}"

    @property
    def value(self) -> str:
        return self.kind if self.cluster is None else f"{self.kind}|{self.cluster}"


def open_form(action_id: str, value: str) -> OpenForm:
    _, _, cluster = value.partition("|")
    return OpenForm(action_id.removeprefix("open_form_"), cluster or None)


@dataclass(frozen=True)
class AuditPage:
    """The next page of an audit log: entries older than ``before``, with the same filters."""

    before: float | None
    cluster: str | None = None
    by: str | None = None
    since: int | None = None
    csv: bool = False  # the whole log so filtered, as a CSV file in the channel

    @property
    def action_id(self) -> ActionId:
        return ActionId.AUDIT_CSV if self.csv else ActionId.AUDIT_PAGE

    @property
    def value(self) -> str:
        before = "" if self.before is None else repr(self.before)
        return f"{before}|{self.cluster or ''}|{self.by or ''}|{self.since or ''}"


def audit_page(value: str, csv: bool = False) -> AuditPage:
    try:
        before, cluster, by, since = value.split("|")
        return AuditPage(
            float(before) if before else None,
            cluster or None,
            by or None,
            int(since) if since else None,
            csv,
        )
    except ValueError:
        raise ActionError("That page of the audit log is not one clusterbot offers.") from None


@dataclass(frozen=True)
class SweepNow:
    action_id = ActionId.SWEEP_NOW
    value = "sweep"


@dataclass(frozen=True)
class HealthSweepNow:
    """Sweep now, then show the clusters' health."""

    action_id = ActionId.HEALTH_SWEEP_NOW
    value = "sweep"


# The idle alert's snoozes; a click may ask only one of these (a forged value, a year of
# silence, is not one).
SNOOZE_CHOICES = ((3600, "1 hour"), (8 * 3600, "8 hours"), (24 * 3600, "24 hours"))


def offered(value: str, choices: tuple[tuple[int, str], ...]) -> tuple[str, int]:
    """A snooze button's value read back: its cluster and one of the ``choices`` offered."""
    seconds, _, cluster = value.partition("|")
    if not cluster or seconds not in {str(s) for s, _ in choices}:
        raise ActionError("That snooze choice is not one clusterbot offers.")
    return cluster, int(seconds)


def snooze(value: str) -> Snooze:
    return Snooze(*offered(value, SNOOZE_CHOICES))


def needs(value: str) -> str:
    if not value:
        raise ActionError("The button carried nothing to act on.")
    return value
