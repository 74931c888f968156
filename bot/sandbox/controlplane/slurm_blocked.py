"""Which pending jobs Slurm holds up on nodes that are not available, and how it says so.

slurmctld's node_scheduler.c: a job whose required nodes are not available waits with
``state_reason`` WAIT_NODE_NOT_AVAIL (``ReqNodeNotAvail``) and ``state_desc``
"ReqNodeNotAvail, UnavailableNodes:NODES" (the partition's nodes that are not up: DOWN or
not responding, narrowed to the job's required nodes), or "ReqNodeNotAvail, May be reserved
for other job" when none of them is down. The simulator says so for a pending job that names
``required_nodes`` one of which is out of service, or that needs more nodes than its
partition has in service.
"""

from __future__ import annotations

from typing import Any

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
        return "ReqNodeNotAvail", f"ReqNodeNotAvail, UnavailableNodes:{','.join(down)}"
    return "ReqNodeNotAvail", "ReqNodeNotAvail, May be reserved for other job"
