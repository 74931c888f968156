"""Which pending jobs Slurm would start, and which it holds up on nodes that are not
available, and how it says so.

slurmctld's node_scheduler.c: a job whose required nodes are not available waits with
``state_reason`` WAIT_NODE_NOT_AVAIL (``ReqNodeNotAvail``) and ``state_desc``
"ReqNodeNotAvail, UnavailableNodes:NODES" (a host list of the partition's nodes not up: DOWN or
not responding, narrowed to the job's required nodes), or "ReqNodeNotAvail, May be reserved
for other job" when none of them is down. The simulator says so for a pending job that names
``required_nodes`` one of which is out of service, or that needs more nodes than its
partition has in service.
"""

from __future__ import annotations

from typing import Any

from bot.sandbox.controlplane.slurm_parts import (
    BUSY_JOB_STATES,
    HELD_REASON_CODES,
    HELD_STATE_FLAGS,
    NEVER_REASON_CODES,
    hostlist,
    slurm_int,
    states_of,
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
    wanted = required(job)
    usable = len(mine) - len(out)
    if not (set(wanted) & set(out)) and int(job.get("node_count", 1)) <= usable:
        return None
    down = [n for n in out if NOT_UP & set(states[n][0]) and (not wanted or n in wanted)]
    if down:
        return "ReqNodeNotAvail", f"ReqNodeNotAvail, UnavailableNodes:{hostlist(down)}"
    return "ReqNodeNotAvail", "ReqNodeNotAvail, May be reserved for other job"


def runnable(job: dict[str, Any], now: float) -> bool:
    """Whether Slurm would give the job nodes now: running, or pending and neither held,
    never to start, nor waiting for a begin time. power_save.html: a powered-down node is
    resumed when a job is allocated to it, and a pending job that cannot start is allocated
    nothing. The held and never-starting reasons are the ones job_reason_codes.html gives
    (``slurm_parts``)."""
    states = set(states_of(job))
    if BUSY_JOB_STATES & states:
        return True
    if "PENDING" not in states or HELD_STATE_FLAGS & states or job.get("hold") is True:
        return False
    if job.get("state_reason") in HELD_REASON_CODES | NEVER_REASON_CODES:
        return False
    begin = slurm_int(job.get("begin_time")) or slurm_int(job.get("eligible_time"))
    return begin is None or begin <= now
