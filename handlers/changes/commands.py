"""The changes a person asks for by name: resize a node pool, delete a cluster, restore a
deleted one. Each is a typed command whose plan the approval flow previews on a card."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from handlers.changes.delete import plan_delete
from handlers.changes.resize import plan_resize
from handlers.grammar import (
    MAX_NODES,
    POOL_ID,
    CommandError,
    arity,
    cluster_word,
    echo,
    new_cluster_id,
)

if TYPE_CHECKING:
    from handlers.changes.approvals import Approvals
    from handlers.changes.plan import ChangePlan
    from handlers.commanding import Caller
    from handlers.costs import PriceBook
    from handlers.domain.models import Cluster
    from handlers.replies import Reply

RESIZE_USAGE = "/cluster resize CLUSTER POOL N   (or MIN:MAX)"
DELETE_USAGE = "/cluster delete CLUSTER"
RESTORE_USAGE = "/cluster restore CLUSTER [as NEW_ID]"


@dataclass(frozen=True)
class Resize:
    cluster: str
    pool: str
    min_nodes: int
    max_nodes: int
    subcommand: ClassVar[str] = "resize"

    def plan(self, cluster: Cluster, prices: PriceBook) -> ChangePlan[Any]:
        return plan_resize(cluster, self.pool, self.min_nodes, self.max_nodes, prices)


@dataclass(frozen=True)
class Delete:
    cluster: str
    subcommand: ClassVar[str] = "delete"

    def plan(self, cluster: Cluster, prices: PriceBook) -> ChangePlan[Any]:
        return plan_delete(cluster, prices)


@dataclass(frozen=True)
class Restore:
    """Create a deleted cluster again from its kept spec, under its own id or ``new_id``."""

    cluster: str
    new_id: str | None = None


def _count(word: str) -> int:
    if not word.isdigit():
        raise CommandError(f"{echo(word)} is not a node count: use a whole number", "resize")
    value = int(word)
    if value > MAX_NODES:
        raise CommandError(f"{value} nodes is more than the {MAX_NODES} allowed here", "resize")
    return value


def parse_resize(args: list[str]) -> Resize:
    arity(args, RESIZE_USAGE, 3, 3)
    cluster = cluster_word(args[0], "resize")
    if not POOL_ID.match(args[1]):
        raise CommandError(f"{echo(args[1])} is not a node pool id", "resize")
    low_text, colon, high_text = args[2].partition(":")
    low = _count(low_text)
    high = _count(high_text) if colon else low
    if low > high:
        raise CommandError(f"MIN {low} is more than MAX {high}", "resize")
    return Resize(cluster, args[1], low, high)


def parse_restore(args: list[str]) -> Restore:
    arity(args, RESTORE_USAGE, 1, 3)
    cluster = cluster_word(args[0], "restore")
    if len(args) == 1:
        return Restore(cluster)
    if len(args) == 2 or args[1].lower() != "as":
        raise CommandError(f"restore takes {echo(' '.join(args[1:]))}: use as NEW_ID", "restore")
    return Restore(cluster, new_cluster_id(args[2], "restore"))


async def run_restore(approvals: Approvals, command: Restore, caller: Caller) -> Reply | None:
    """The approval card is the answer (or, while it is owed, word that it comes)."""
    request = await approvals.request_restore(
        caller.user, caller.channel, command.cluster, command.new_id
    )
    return await approvals.card_pending(request)


async def run_change(
    approvals: Approvals, command: Resize | Delete, caller: Caller
) -> Reply | None:
    """The approval card is the answer, posted in the channel for everyone (or, while it is
    owed, word that it comes)."""
    request = await approvals.request_change(caller.user, caller.channel, command)
    return await approvals.card_pending(request)
