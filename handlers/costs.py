"""Estimated cost per hour of clusters and node pools, from a dated list-price table.

Every figure is an estimate: approximate on-demand list prices per node (accelerators
included for accelerator-optimized machine types), overridable per machine type in the policy
file's ``[prices]``. SPOT and FLEX_START pools use a discount factor; RESERVATION pools are
priced like on-demand, since the reservation is paid for whether or not it is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bot.vertex.models import Cluster, NodePool

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
DISCOUNTS = {"SPOT": 0.35, "FLEX_START": 0.5}


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
        return base * DISCOUNTS.get(pool.provisioning_model or "", 1.0)

    def pool_hour(self, pool: NodePool, nodes: int | None = None) -> float | None:
        price = self.node_hour(pool)
        count = pool.node_count if nodes is None else nodes
        if count == 0:
            return 0.0
        return None if price is None else price * count

    def pools_hour(self, pools: Iterable[NodePool]) -> float | None:
        """Sum for these pools; None when any pool with nodes has no known price."""
        total = 0.0
        for pool in pools:
            cost = self.pool_hour(pool)
            if cost is None:
                return None
            total += cost
        return total

    def cluster_hour(self, cluster: Cluster) -> float | None:
        return self.pools_hour(cluster.node_pools)


def money(value: float | None, *, per_hour: bool = True, signed: bool = False) -> str:
    """An estimate as shown to people: ``~$212.39/h``, ``~+$106.00/h`` or ``unknown``."""
    if value is None:
        return "unknown"
    sign = ("+" if value > 0 else "-" if value < 0 else "±") if signed else ""
    amount = abs(value) if signed else value
    text = f"{amount:,.2f}" if amount < 1000 else f"{amount:,.0f}"
    return f"~{sign}${text}" + ("/h" if per_hour else "")
