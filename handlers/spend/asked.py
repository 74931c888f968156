"""What ``/cluster cost`` is asked: ``[CLUSTER] [since 30d] [by pool|target|label KEY]``."""

from __future__ import annotations

from dataclasses import dataclass

from handlers.grammar import CommandError, cluster_word, echo, time_back
from handlers.spend.runs import HOUR

COST = (  # the subcommand's summary in the help
    "what clusters cost while clusterbot watched them, the part spent idle and what it saved, "
    "with a chart"
)
DEFAULT_SINCE = 30 * 24 * HOUR
# how far back a report reads, and how long the ledger keeps a run (older runs are dropped):
# a year and a month, so that a month can be set beside the same month a year before
LEDGER_KEEPS = 400 * 24 * 3600
GROUPS = ("pool", "target", "label")

COST_USAGE = "/cluster cost [CLUSTER] [since 30d] [by pool|target|label KEY]"


@dataclass(frozen=True)
class Cost:
    cluster: str | None = None
    since: float = DEFAULT_SINCE  # seconds back from now
    by: str | None = None  # pool, target or label; None: by cluster (by pool for one)
    label: str | None = None  # the label's key, with by label


def parse_cost(args: list[str]) -> Cost:
    words = list(args)
    cluster = by = label = None
    since = DEFAULT_SINCE
    if words and words[0].lower() not in ("since", "by"):
        cluster = cluster_word(words.pop(0), "cost")
    while words:
        key = words.pop(0).lower()
        if key not in ("since", "by") or not words:
            raise CommandError(f"cost takes {echo(key)}: use since 30d or by pool", "cost")
        value = words.pop(0).lower()
        if key == "since":
            since = time_back(value, "cost", most=LEDGER_KEEPS)
        elif value not in GROUPS:
            raise CommandError(f"cost by {echo(value)}: use by pool, target or label KEY", "cost")
        else:
            by = value
            if value == "label":
                if not words:
                    raise CommandError("by label needs the label's key: by label team", "cost")
                label = words.pop(0)
    return Cost(cluster, since, by, label)
