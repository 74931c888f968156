"""What a kind of change is to the flows that run it.

The approval flow draws a card from ``title``, ``ask`` and ``card``; the executor sends the
change through ``effect`` and ``apply``; the tracker and recovery judge it with ``applied``
and ``drift``; the audit says it with ``words``. None of them knows which kind it runs: a
kind is one module that subclasses ``ChangeKind`` and one line in ``handlers/changes/kinds.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from handlers.changes.plan import ChangePlan, Detail, fingerprint
from handlers.domain.models import Cluster
from handlers.replies import Code, Confirm, Line, Part, Strong

if TYPE_CHECKING:
    from handlers.changes.effects import Effect
    from handlers.entities import ApprovalRequest

D = TypeVar("D", bound=Detail)


class ChangeKind(Generic[D]):
    """One kind of change. Subclasses set the names and override what differs."""

    name: str  # stored with the request, and the discriminator of its detail
    detail: type[D]
    effect: Effect
    doing: str  # what it does to a cluster, for "Could not …"
    heading: str  # the card's title before the cluster's id
    verb: str = "change"  # "asks to {verb} CLUSTER"
    destructive: bool = False  # approved only by the policy's delete approvers
    needs_running: bool = True  # refused when the cluster has left RUNNING meanwhile
    recorded: str = "recorded"  # a standing change's outcome once approved (``RECORD``)

    def __init__(self) -> None:
        if self.detail.change_kind not in (None, self):
            raise ValueError(f"{self.detail.__name__} is already the detail of another kind")
        self.detail.change_kind = self  # a plan names its kind by its detail

    def title(self, plan: ChangePlan[D]) -> str:
        return f"{self.heading}: {plan.cluster_id}"

    def ask(self, plan: ChangePlan[D]) -> Line:
        """What the requester asks, after their name on the card."""
        return (f" asks to {self.verb} ", Strong(plan.cluster_id), " (", Code(plan.target), ").")

    def card(self, plan: ChangePlan[D]) -> list[Part]:
        """The change itself on the card: what it does, before and after."""
        raise NotImplementedError

    def approve(self, plan: ChangePlan[D]) -> tuple[str, str, Confirm | None]:
        """The Approve button: its label, its style and the confirmation it asks for."""
        return "Approve", "primary", None

    def finished(self, request: ApprovalRequest) -> list[Part]:
        """What the card adds once the request has ended (a way back, say)."""
        return []

    def wanted(self, plan: ChangePlan[D]) -> str:
        """What the plan asks for, in a few words (for a change that did not happen)."""
        raise NotImplementedError

    def words(self, plan: ChangePlan[D]) -> str:
        """The change in words, for the audit log."""
        return self.wanted(plan)

    def apply(self, cluster: Cluster, plan: ChangePlan[D]) -> Cluster:
        """The full resource to PATCH, built on the freshly read cluster: every field the
        plan does not change is kept as read, known or not."""
        raise NotImplementedError(f"a {self.name} is not a PATCH")

    def created(self, plan: ChangePlan[D]) -> Cluster:
        """The cluster to CREATE."""
        raise NotImplementedError(f"a {self.name} creates no cluster")

    def applied(self, plan: ChangePlan[D], current: Cluster) -> bool:
        """Whether the cluster shows the change."""
        raise NotImplementedError

    def drift(self, plan: ChangePlan[D], current: Cluster) -> str | None:
        """Why the plan no longer fits the cluster as it is now, or None when it still does."""
        if self.needs_running and current.state != "RUNNING":
            return f"{current.cluster_id} is now {current.state}"
        if fingerprint(current) == plan.fingerprint:
            return None
        return self.changed(plan, current) or "its configuration changed since this was requested"

    def changed(self, plan: ChangePlan[D], current: Cluster) -> str | None:
        """What of the plan's own concern changed in the cluster, when that can be named."""
        return None
