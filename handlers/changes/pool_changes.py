"""A node pool's change in a plan: its bounds and cost before and after, in numbers and in
words, and what the approver must be warned of (a pool made fixed, reserved capacity)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from handlers.costs import PriceBook, Range
from handlers.domain.models import Cluster
from handlers.domain.pools import NodePool


class PoolChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    pool_id: str
    machine: str
    min_before: int
    max_before: int
    min_after: int
    max_after: int
    cost_before: float | None
    cost_after: float | None  # at the new minimum
    cost_after_high: float | None = None  # at the new maximum; None: same as cost_after
    nodes_before: int | None = None  # nodes that existed when planned
    reserved: bool = False
    reservation: str | None = None

    @property
    def changed(self) -> bool:
        return (self.min_before, self.max_before) != (self.min_after, self.max_after)

    @property
    def bounds_before(self) -> str:
        return bounds(self.min_before, self.max_before)

    @property
    def bounds_after(self) -> str:
        return bounds(self.min_after, self.max_after)

    @property
    def words(self) -> str:
        """The change in words: ``a4: scales 0–2 with the queue → fixed at 3 nodes``."""
        before = describe(self.min_before, self.max_before)
        after = describe(self.min_after, self.max_after)
        if self.min_before == self.max_before and self.min_after == self.max_after:
            return f"{self.pool_id}: {self.min_before} → {self.min_after} nodes"
        return f"{self.pool_id}: {before} → {after}"


def bounds(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}:{high}"


def describe(low: int, high: int) -> str:
    if low == high:
        return f"fixed at {low} node{'s' if low != 1 else ''}"
    return f"scales {low}–{high} with the queue"


def pool_change(cluster: Cluster, pool: NodePool, new: NodePool, prices: PriceBook) -> PoolChange:
    nodes = cluster.nodes(pool)
    cost_now = prices.pool_hour(pool, nodes)
    after = prices.bounds_hour(new, new.min_nodes, new.max_nodes)
    if (pool.min_nodes, pool.max_nodes) == (new.min_nodes, new.max_nodes):
        after = Range(cost_now, cost_now)  # untouched: it costs what it costs now
    elif pool.reserved and cost_now is not None:
        # The reservation is billed whether its nodes run or not: fewer nodes save nothing.
        after = Range(
            None if after.low is None else max(after.low, cost_now),
            None if after.high is None else max(after.high, cost_now),
        )
    return PoolChange(
        pool_id=pool.id,
        machine=pool.machine_description,
        min_before=pool.min_nodes,
        max_before=pool.max_nodes,
        min_after=new.min_nodes,
        max_after=new.max_nodes,
        cost_before=cost_now,
        cost_after=after.low,
        cost_after_high=after.high,
        nodes_before=nodes,
        reserved=pool.reserved,
        reservation=pool.reservation_name,
    )


def pool_warnings(changes: list[PoolChange]) -> tuple[str, ...]:
    notes = []
    for change in changes:
        if not change.changed:
            continue
        if change.min_before < change.max_before and change.min_after == change.max_after:
            notes.append(
                f"{change.pool_id} scales with the queue today ({change.min_before}–"
                f"{change.max_before} nodes, {change.nodes_before} now); this makes it fixed at "
                f"{change.min_after} nodes, billed all the time"
            )
        if change.reserved and change.min_after < (change.nodes_before or 0):
            where = f" {change.reservation}" if change.reservation else ""
            notes.append(
                f"{change.pool_id} is reserved capacity (reservation{where}): fewer nodes free "
                "no money until the reservation is released"
            )
    return tuple(notes)
