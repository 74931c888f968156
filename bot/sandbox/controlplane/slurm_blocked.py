"""Which pending jobs Slurm would start, and which it holds up on nodes that are not
available, and how it says so.

slurmctld's node_scheduler.c: a job whose required nodes are not available waits with
``state_reason`` WAIT_NODE_NOT_AVAIL (``ReqNodeNotAvail``) and ``state_desc``
"ReqNodeNotAvail, UnavailableNodes:NODES" (a host list of the partition's nodes not up: DOWN or
not responding, narrowed to the job's required nodes), or "ReqNodeNotAvail, May be reserved
for other job" when none of them is down. The simulator says so for a pending job that names
``required_nodes`` one of which is out of service. A job that names none but needs more
nodes than its partition has in service waits as slurmctld's main scheduler leaves it
(job_scheduler.c 1735-1750): Resources, "Nodes required for job are DOWN, DRAINED or
reserved for jobs in higher priority partitions".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.sandbox.controlplane.slurm_parts import (
    BUSY_JOB_STATES,
    HELD_STATE_FLAGS,
    hostlist,
    slurm_int,
    states_of,
)

TOO_FEW = (
    "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
)
# out of service (a node powered down by power saving is not: Slurm resumes it for a job)
OUT = {"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING"}
NOT_UP = {"DOWN", "NOT_RESPONDING"}  # slurmctld's up_node_bitmap leaves these out


def required(job: dict[str, Any]) -> list[str]:
    """The job's required nodes, as the short form gives them (a list, or names with commas)."""
    named = job.get("required_nodes") or []
    return named.split(",") if isinstance(named, str) else [str(n) for n in named]


def blocked(
    job: dict[str, Any],
    states: dict[str, tuple[list[str], str]],
    partitions: dict[str, list[str]],
) -> tuple[str, str] | None:
    """``(state_reason, state_description)`` for a pending job held up by nodes out of
    service, or None."""
    partition = str(job.get("partition") or "")
    mine = [n for n, names in partitions.items() if partition in names]
    if not mine:  # a partition the simulator does not place: nothing to say
        return None
    out = [n for n in mine if OUT & set(states.get(n, ([], ""))[0])]
    # in a maintenance window, and not the job's own reservation
    kept = [n for n in mine if n not in out and "MAINTENANCE" in states.get(n, ([], ""))[0]]
    if job.get("reservation"):
        kept = []
    wanted = required(job)
    usable = len(mine) - len(out) - len(kept)
    if not (set(wanted) & set(out)) and int(job.get("node_count", 1)) <= usable:
        return None
    if kept and not (set(wanted) & set(out)):
        # node_scheduler.c 3817-3821: every usable node is in a maintenance reservation
        return "ReqNodeNotAvail", "ReqNodeNotAvail, Reserved for maintenance"
    if not wanted:
        # job_scheduler.c 1735-1750: the main scheduler finds fewer nodes available in the
        # partition than the job's minimum, before any node is selected
        return "Resources", TOO_FEW
    down = [n for n in out if NOT_UP & set(states[n][0]) and (not wanted or n in wanted)]
    if down:
        return "ReqNodeNotAvail", f"ReqNodeNotAvail, UnavailableNodes:{hostlist(down)}"
    return "ReqNodeNotAvail", "ReqNodeNotAvail, May be reserved for other job"


# job_reason_codes.html: the reasons of a pending job that starts once nodes are free or its
# turn comes (Resources, Priority, None), or once its begin time or reservation comes
STARTS_WHEN_FREE = frozenset({"None", "Resources", "Priority", "BeginTime", "Reservation"})


def runnable(job: dict[str, Any], now: float, reservations: Sequence[dict[str, Any]] = ()) -> bool:
    """Whether Slurm would give the job nodes now: running, or pending for a reason of
    ``STARTS_WHEN_FREE``, not held, with its begin time and its reservation come.
    power_save.html: a powered-down node is resumed when a job is allocated to it, and a
    pending job that cannot start (a limit, a budget, a dependency, a reservation not begun)
    is allocated nothing."""
    states = set(states_of(job))
    if BUSY_JOB_STATES & states:
        return True
    if "PENDING" not in states or HELD_STATE_FLAGS & states or job.get("hold") is True:
        return False
    if str(job.get("state_reason") or "None") not in STARTS_WHEN_FREE:
        return False
    begin = slurm_int(job.get("begin_time")) or slurm_int(job.get("eligible_time"))
    if begin is not None and begin > now:
        return False
    wanted = job.get("reservation")
    if not wanted:
        return True
    found = next((r for r in reservations if r["name"] == wanted), None)
    return found is not None and found["start_time"] <= now < found["end_time"]
