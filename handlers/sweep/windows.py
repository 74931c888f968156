"""Slurm's reservations as the idle report tells them: which a cluster's sweep reads, the
starts of those its jobs wait for, and its maintenance windows with what they cost.

scontrol(1) "RESERVATIONS": a reservation holds nodes for its users from ``StartTime`` to
``EndTime``; with ``Flags=MAINT`` it is a maintenance window, and sinfo(1) shows its nodes
MAINT ("in a reservation with a flag value of maintenance"). While the window lasts the
nodes run nothing, and each one whose VM exists is paid for: the report says until when,
and what the rest of the window costs. Only a sweep that sees a job waiting for a
reservation, or a node in one, asks slurmrestd for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from handlers.costs import money
from handlers.domain.operations import SlurmJob, SlurmNode, SlurmReservation
from handlers.slurm.hostlist import expand
from handlers.slurm.reasons import MAINTENANCE_FLAG
from handlers.sweep.demand import WAITS_FOR_RESERVATION
from handlers.words import plural

# squeue/sinfo: a node in a reservation shows RESERVED (NODE_STATE_RES), MAINTENANCE too
# when it is a maintenance window
IN_A_RESERVATION = frozenset({"RESERVED", MAINTENANCE_FLAG})


def wanted(jobs: Iterable[SlurmJob], nodes: Iterable[SlurmNode]) -> bool:
    """Whether the sweep needs the cluster's reservations: a job waits for one, or a node is
    in one."""
    return any(j.pending and j.reason == WAITS_FOR_RESERVATION for j in jobs) or any(
        IN_A_RESERVATION & n.states for n in nodes
    )


def starts(reservations: Iterable[SlurmReservation]) -> dict[str, float | None]:
    return {r.name: r.start for r in reservations}


def _utc(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC")


def maintenance_notes(
    in_maintenance: Sequence[SlurmNode],
    reservations: Sequence[SlurmReservation],
    node_hour: Mapping[str, float | None],
    now: float,
) -> tuple[tuple[str, ...], ...]:
    """One note per maintenance window holding nodes of this cluster whose VMs exist: how
    many, until when, and what the rest of the window costs (each node at the price of the
    pool its partition runs on, or the dearest when Slurm names none)."""
    windows = [r for r in reservations if r.maintenance and r.active(now)]
    dearest = max((p for p in node_hour.values() if p is not None), default=None)
    left = {n.name: n for n in in_maintenance}
    notes = []
    for window in windows:
        named = set(expand(window.nodes))
        mine = [left.pop(name) for name in list(left) if name in named]
        if not mine:
            continue
        hour: float | None = 0.0
        for node in mine:
            prices = [node_hour[p] for p in node.partitions if p in node_hour]
            price = prices[0] if prices else dearest
            hour = None if hour is None or price is None else hour + price
        if window.end is None:
            until, cost = "no end set", "it costs " + money(hour)
        else:
            hours = max(0.0, window.end - now) / 3600
            until = _utc(window.end)
            cost = "the rest of the window costs " + (
                money(hour * hours, per_hour=False) if hour is not None else "an unknown amount"
            )
        notes.append(
            (
                f"{plural(len(mine), 'node')} reserved for maintenance until {until} "
                f"(reservation {window.name}), paid for and running nothing: {cost}",
            )
        )
    if left:
        notes.append(
            (
                f"{plural(len(left), 'node')} in maintenance that no window Slurm lists "
                "names: paid for, running nothing",
            )
        )
    return tuple(notes)
