"""Forms: what a person fills in instead of typing every word of a change.

``/cluster resize`` with words missing, ``/cluster delete`` with no cluster, and
``/cluster slurm CLUSTER prolog|epilog add [N]`` or ``replace N`` (a script cannot be typed in
a command) ask for the rest in a form. This module knows which texts ask for a form, what the
form offers (clusters, pools, places), what a choice costs, and which entries are wrong, field
by field; the platform adapter draws the form and hands a complete command to the dispatcher,
so a form makes the same request and card as the typed command.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from handlers.changes.approval_card import cost_change
from handlers.changes.commands import Delete, Resize
from handlers.changes.plan import PlanError
from handlers.changes.resize import plan_resize
from handlers.costs import PriceBook, money, money_range
from handlers.domain.models import Cluster
from handlers.forms.model import Choice
from handlers.grammar import MAX_NODES
from handlers.reading.clusters import ClusterDirectory
from handlers.replies import Line, Strong
from handlers.slurm.commands import SlurmConfig, SlurmScripts
from handlers.slurm.scripts import scripts_of
from handlers.slurm.settings import KNOWN
from handlers.slurm.settings import normal as normal_key

OPTIONS = 100  # an external select shows at most 100 options
LISTING_SECONDS = 30.0  # how long the cluster list behind a select is reused while typing
MAX_SCRIPT_BYTES = 64 * 1024  # clusterbot's own bound on one script (the API states none)


@dataclass(frozen=True)
class Estimate:
    before: str
    after: str
    change: str


class Forms:
    """What forms offer and how their entries are checked, from the clusters as they are."""

    def __init__(
        self,
        directory: ClusterDirectory,
        prices: PriceBook,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.prices = prices
        self.clock = clock
        self._clusters: tuple[float, list[Cluster]] | None = None

    async def _all(self) -> list[Cluster]:
        now = self.clock()
        if self._clusters is None or now - self._clusters[0] > LISTING_SECONDS:
            listings = await self.directory.listings(self.directory.read_deadline)
            found = [c for listing in listings for c in listing.clusters]
            self._clusters = (now, found)
        return self._clusters[1]

    async def clusters(self, typed: str) -> list[Choice]:
        """Clusters whose id contains what was typed (in any case): those that start with it
        first, each group by id."""
        needle = typed.strip().lower()
        found = [c for c in await self._all() if needle in c.cluster_id]
        found.sort(key=lambda c: (not c.cluster_id.startswith(needle), c.cluster_id))
        return [self.cluster_choice(c) for c in found[:OPTIONS]]

    def cluster_choice(self, cluster: Cluster) -> Choice:
        region = (cluster.name or "").split("/")[3] if cluster.name else ""
        cost = money(self.prices.cluster_hour(cluster))
        return Choice(
            cluster.name or cluster.cluster_id, f"{cluster.cluster_id} · {region} · {cost}"
        )

    def deletes(self, cluster: Cluster) -> Line:
        """What a delete of the cluster removes, and what it costs now."""
        pools = ", ".join(f"{p.id} ({p.bounds} {_nodes(p.bounds)})" for p in cluster.node_pools)
        cost = money(self.prices.cluster_hour(cluster))
        return (
            "This deletes ",
            Strong(cluster.cluster_id),
            f": pools {pools}; it costs {cost} now.",
        )

    async def cluster(self, key: str, subcommand: str) -> Cluster:
        return await self.directory.resolve(key, subcommand)

    def pools(self, cluster: Cluster) -> list[Choice]:
        """Its pools, compute pools first and the login pool last."""
        choices = []
        ordered = sorted(cluster.node_pools, key=lambda p: p.id == cluster.login_pool_id)
        for pool in ordered:
            machine = pool.machine_spec.machine_type if pool.machine_spec else "?"
            login = ", login" if pool.id == cluster.login_pool_id else ""
            label = f"{pool.id} · {machine} · {pool.bounds} {_nodes(pool.bounds)}{login}"
            choices.append(Choice(pool.id, label[:75]))
        return choices

    def estimate(
        self, cluster: Cluster, pool_id: str, low: int | None, high: int | None
    ) -> Estimate | None:
        """The cost now and after, for a pool and counts (a range when min < max)."""
        pool = cluster.pool(pool_id)
        if pool is None:
            return None
        before = money(self.prices.cluster_hour(cluster))
        if low is None:
            return Estimate(before, "-", "-")
        try:
            plan = plan_resize(
                cluster, pool_id, low, high if high is not None else low, self.prices
            )
        except PlanError as error:
            return Estimate(before, "-", str(error))
        return Estimate(before, money_range(plan.after), cost_change(plan))

    def typed_resize(
        self, cluster: Cluster, pool_id: str, low_text: str | None, high_text: str | None
    ) -> tuple[Estimate | None, dict[str, str]]:
        """While the counts are typed: the cost, and the problems of what is typed so far in
        the words a submission would use (none before anything is typed). With a problem the
        cost after is not guessed at."""
        pool = cluster.pool(pool_id)
        if pool is None:
            return None, {}
        if low_text is None and high_text is None:
            return self.estimate(cluster, pool_id, pool.min_nodes, pool.max_nodes), {}
        command, problems = self.check_resize(cluster, pool_id, low_text, high_text)
        if command is None:  # the pool exists: every problem is a count's
            before = money(self.prices.cluster_hour(cluster))
            return Estimate(before, "-", "-"), problems
        return self.estimate(cluster, pool_id, command.min_nodes, command.max_nodes), {}

    def check_resize(
        self, cluster: Cluster, pool_id: str | None, low_text: str | None, high_text: str | None
    ) -> tuple[Resize | None, dict[str, str]]:
        """The command, or the problems of the entries keyed by field (pool, min, max)."""
        errors: dict[str, str] = {}
        if not pool_id or cluster.pool(pool_id) is None:
            errors["pool"] = f"choose one of {cluster.cluster_id}'s node pools"
        low = _count(low_text, "min", errors)
        high = _count(high_text, "max", errors) if high_text not in (None, "") else low
        if low is not None and high is not None and low > high:
            errors["max"] = f"MAX {high} is less than MIN {low}"
        if errors or pool_id is None or low is None or high is None:
            return None, errors
        # what the plan refuses (a size the pool has, the login pool's rules) the request
        # itself says, at the form's last field
        return Resize(cluster.name or cluster.cluster_id, pool_id, low, high), {}

    @staticmethod
    def check_delete(cluster: Cluster, typed: str | None) -> tuple[Delete | None, dict[str, str]]:
        """Deleting needs the cluster's id typed again, exactly (any case)."""
        if (typed or "").strip().lower() != cluster.cluster_id:
            return None, {"confirm": f"type {cluster.cluster_id} to confirm"}
        return Delete(cluster.name or cluster.cluster_id), {}

    @staticmethod
    def places(cluster: Cluster, which: str) -> list[Choice]:
        """Where a new script may go, and which it may replace."""
        count = len(scripts_of(cluster, which))
        choices = [Choice(f"add:{count + 1}", f"add at the end (place {count + 1})")]
        choices += [Choice(f"add:{n}", f"add at place {n}") for n in range(1, count + 1)]
        choices += [Choice(f"replace:{n}", f"replace {which} {n}") for n in range(1, count + 1)]
        return choices[:OPTIONS]

    @staticmethod
    def check_script(
        cluster: Cluster, which: str, place: str | None, pasted: str | None, files: Sequence[str]
    ) -> tuple[SlurmScripts | None, dict[str, str]]:
        """The command for a pasted or uploaded script, or the problems by field."""
        errors: dict[str, str] = {}
        given = [s for s in [pasted or "", *files] if s.strip()]
        if len(given) != 1:
            where = "paste" if not files else "file"
            errors[where] = "give the script once: paste it or upload one file, not both"
            if not given:
                errors[where] = "paste the script or upload a file"
        script = given[0].replace("\r\n", "\n") if len(given) == 1 else ""
        if script and len(script.encode()) > MAX_SCRIPT_BYTES:
            errors["file" if files else "paste"] = (
                f"the script is {len(script.encode()):,} bytes; clusterbot takes at most "
                f"{MAX_SCRIPT_BYTES:,}"
            )
        verb, _, number = (place or "").partition(":")
        if verb not in ("add", "replace") or not number.isdigit():
            errors["place"] = "choose where the script goes"
        if errors:
            return None, errors
        command = SlurmScripts(
            cluster.name or cluster.cluster_id, which, verb, int(number), content=script
        )
        return command, {}


def setting_choices(cluster: Cluster) -> list[Choice]:
    """The slurm.conf keys a form offers: the known ones, then those set now, with values."""
    config = dict(cluster.slurm.config or {})
    current = {normal_key(k): (k, v) for k, v in config.items()}
    keys = [k.name for k in KNOWN.values()]
    keys += sorted(k for k in config if normal_key(k) not in KNOWN)
    choices = []
    for key in keys:
        _name, value = current.get(normal_key(key), (key, None))
        shown = f"{key} = {value}" if value is not None else f"{key} (not set)"
        choices.append(Choice(key, shown[:75]))
    return choices[:OPTIONS]


def check_setting(
    cluster: Cluster, key: str | None, value: str | None
) -> tuple[SlurmConfig | None, dict[str, str]]:
    """The command for one key and value, or the problems by field; the value's own checks
    are the plan's, as for the typed command."""
    if not key:
        return None, {"key": "choose a setting"}
    if not (value or "").strip():
        return None, {
            "value": "give a value (to remove a key, type /cluster slurm CLUSTER unset KEY)"
        }
    assert value is not None
    return SlurmConfig(cluster.name or cluster.cluster_id, sets=((key, value.strip()),)), {}


def _nodes(bounds: str) -> str:
    """The noun after a pool's bounds: 1 node, 0 nodes, 2 nodes, 0:1 nodes."""
    return "node" if bounds == "1" else "nodes"


def _count(text: str | None, field: str, errors: dict[str, str]) -> int | None:
    if text in (None, ""):
        errors[field] = "give a node count"
        return None
    assert text is not None
    if text.startswith("-") and text[1:].strip().isdigit():
        errors[field] = f"{field.upper()} {text}: a node count cannot be negative"
        return None
    if not text.isdigit():
        errors[field] = f"{text[:20]!r} is not a whole number of nodes"
        return None
    value = int(text)
    if value > MAX_NODES:
        errors[field] = f"at most {MAX_NODES} nodes"
        return None
    return value
