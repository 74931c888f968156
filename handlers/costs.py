"""Estimated cost per hour of clusters and node pools, from a dated list-price table.

Every figure is an estimate: approximate on-demand list prices per node (accelerators
included for accelerator-optimized machine types), overridable per machine type in the policy
file's ``[prices]``. SPOT and FLEX_START pools use a discount factor.

What a cluster costs now is counted from the nodes that exist (``clusterStatus.nodesStatus``),
not from a pool's minimum: a pool at 0:2 that Slurm scaled up to 2 costs two nodes. A pool
that scales with the queue may cost anything between its minimum and its maximum, so a
change to it is shown as a range. RESERVATION pools are billed for the reservation whether
its nodes run or not: removing their nodes frees no money until the reservation is released,
so a saving on them is always $0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from handlers.domain.facts import ClusterFacts
from handlers.domain.pools import NodePool, ProvisioningModel

PRICES_AS_OF = "2026-11"
# USD per node-hour, approximate us-central1 on-demand list prices. Set [prices] in the policy
# file to your region's or your negotiated rates.
LIST_PRICES: dict[str, float] = {
    "a4-highgpu-8g": 106.00,
    "a4x-highgpu-4g": 69.00,
    "a3-ultragpu-8g": 84.81,
    "a3-megagpu-8g": 97.06,
    "a3-highgpu-8g": 88.25,
    "a3-highgpu-4g": 44.12,
    "a3-highgpu-2g": 22.06,
    "a3-highgpu-1g": 11.03,
    "a2-ultragpu-8g": 40.22,
    "a2-highgpu-8g": 29.39,
    "a2-highgpu-1g": 3.67,
    "g2-standard-48": 4.00,
    "g2-standard-24": 2.00,
    "g2-standard-8": 0.85,
    "n2-standard-4": 0.194,
    "n2-standard-8": 0.388,
    "n2-standard-16": 0.777,
    "n2-standard-32": 1.554,
    "n2-standard-64": 3.108,
    "n2-highmem-32": 2.096,
    "c2-standard-60": 3.131,
    "c3-standard-88": 4.66,
    "e2-standard-8": 0.268,
}
DISCOUNTS: dict[str, float] = {ProvisioningModel.SPOT: 0.35, ProvisioningModel.FLEX_START: 0.5}


@dataclass(frozen=True)
class Range:
    """An estimate that may be anywhere between two figures (equal for a fixed pool)."""

    low: float | None
    high: float | None

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def fixed(self) -> bool:
        return self.low == self.high


@dataclass(frozen=True)
class PriceBook:
    prices: Mapping[str, float]

    @classmethod
    def with_overrides(cls, overrides: Mapping[str, float] | None = None) -> PriceBook:
        return cls({**LIST_PRICES, **(overrides or {})})

    def node_hour(self, pool: NodePool) -> float | None:
        machine = pool.machine_spec.machine_type if pool.machine_spec else None
        base = self.prices.get(machine or "")
        if base is None:
            return None
        model = pool.provisioning_model or ""
        return base * DISCOUNTS.get(model, 1.0)

    def pool_hour(self, pool: NodePool, nodes: int) -> float | None:
        """``nodes`` of this pool for an hour; 0 nodes cost nothing even at an unknown price."""
        if nodes == 0:
            return 0.0
        price = self.node_hour(pool)
        return None if price is None else price * nodes

    def bounds_hour(self, pool: NodePool, low: int, high: int) -> Range:
        """What the pool may cost with ``low`` to ``high`` nodes."""
        return Range(self.pool_hour(pool, low), self.pool_hour(pool, high))

    def pools_hour(self, cluster: ClusterFacts, pools: Iterable[NodePool]) -> float | None:
        """These pools' nodes that exist now; None when any has nodes at an unknown price."""
        total = 0.0
        for pool in pools:
            cost = self.pool_hour(pool, cluster.nodes(pool))
            if cost is None:
                return None
            total += cost
        return total

    def cluster_hour(self, cluster: ClusterFacts) -> float | None:
        return self.pools_hour(cluster, cluster.node_pools)

    def freed_hour(self, cluster: ClusterFacts, pools: Iterable[NodePool]) -> float | None:
        """Money per hour that removing every node of these pools stops paying. Reserved
        pools free nothing: the reservation is billed until it is released."""
        return self.pools_hour(cluster, (p for p in pools if not p.reserved))


def money(value: float | None, *, per_hour: bool = True, signed: bool = False) -> str:
    """An estimate as shown to people: ``~$212.39/h``, ``~+$106.00/h`` or ``unknown``."""
    if value is None:
        return "unknown"
    sign = ("+" if value > 0 else "-" if value < 0 else "±") if signed else ""
    amount = abs(value) if signed else value
    text = f"{amount:,.2f}" if amount < 1000 else f"{amount:,.0f}"
    return f"~{sign}${text}" + ("/h" if per_hour else "")


def money_range(value: Range, *, per_hour: bool = True) -> str:
    """``~$212.39/h`` when fixed, ``~$0.39–$318.39/h`` when it may be anywhere between."""
    if not value.known:
        return "unknown"
    if value.fixed:
        return money(value.low, per_hour=per_hour)
    high = money(value.high, per_hour=per_hour).removeprefix("~")
    return f"{money(value.low, per_hour=False)}–{high}"


@dataclass(frozen=True)
class PoolSeen:
    """One pool at one observation."""

    pool: str
    nodes: int
    node_hour: float | None  # list price of one node-hour; None: not in the price book
    compute: bool = True  # False for the login pool: never idle, always paid
    held_idle: int = 0  # of its nodes, those held by idle allocations (handlers/sweep/gpus.py)


def pools_seen(cluster: ClusterFacts, prices: PriceBook) -> tuple[PoolSeen, ...]:
    """Every pool of the cluster as an observation sees it: its nodes that exist now."""
    return tuple(
        PoolSeen(p.id, cluster.nodes(p), prices.node_hour(p), p.id != cluster.login_pool_id)
        for p in cluster.node_pools
    )
