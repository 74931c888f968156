"""Slurm's reasons for a pending job, as an allow-list: which mean the job starts on its own
as soon as this cluster's nodes or its place in the queue allow (demand), and what every other
one means, in plain words.

The names and their meanings are Slurm's: ``doc/html/job_reason_codes.shtml`` (quoted beside
each entry) and the table of ``src/common/job_state_reason.c``, which is every reason
slurmctld can set. Only the reasons listed as demand keep a cluster busy; a reason nobody here
has seen is shown as it is and is not demand (it is not guessed).

- *Demand*: None ("has not been considered yet in the current backfill cycle"), Resources
  ("the resources requested by the job are not available, e.g. already used by other jobs"),
  Priority ("one or more higher priority jobs exist for the partition"), Prolog ("the job's
  Prolog program is still running"), BurstBufferStageIn ("staging the environment for the
  job"), Cleaning ("being requeued and still cleaning up from its previous execution") and
  SchedDefer (FAIL_DEFER: the scheduler deferred it to its next pass). BeginTime is demand
  once the begin time comes near (``handlers/sweep/demand.py``).
- *Waits on something else*: a job it depends on, a license, a reservation, or a limit on
  what its user, account or QOS runs at once; limits "by currently running jobs" clear as
  those jobs end, and while they run the cluster is busy with them anyway.
- *Never, as things stand*: the job asks more than a limit allows per job, node or user, its
  account or QOS used up a budget of minutes ("by past, present and future jobs"), its
  partition's limits or state forbid it, or its account, QOS or constraints are invalid: it
  starts only once someone changes the job or the limit.
- *Blocked by nodes*: nodes it needs are down, drained or not responding (the health rules
  name them).
- *Held*: JobHeldUser, JobHeldAdmin, JobHoldMaxRequeue and JobLaunchFailure: it runs only once
  someone releases it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Wait(StrEnum):
    """What a pending job's reason means for the cluster."""

    DEMAND = "demand"  # starts when this cluster's nodes or its place in the queue allow
    LATER = "later"  # asked not to start before a time (BeginTime)
    OTHER = "other"  # waits on something beside this cluster's nodes
    NEVER = "never"  # cannot start until someone changes the job or a limit
    BLOCKED = "blocked"  # nodes it needs are out of service
    HELD = "held"  # runs only once someone releases it
    MAINTENANCE = "maintenance"  # the nodes it needs are reserved for maintenance
    UNKNOWN = "unknown"  # a reason not known here: shown as Slurm gives it


@dataclass(frozen=True)
class Reason:
    wait: Wait
    words: str  # what it waits for, in plain words


EXACT: dict[str, Reason] = {
    # demand
    "None": Reason(Wait.DEMAND, "not considered by the scheduler yet"),
    "Resources": Reason(Wait.DEMAND, "it waits for nodes or GPUs to become free"),
    "Priority": Reason(Wait.DEMAND, "jobs of higher priority are ahead of it in the queue"),
    "Prolog": Reason(Wait.DEMAND, "its prolog is running"),
    "BurstBufferStageIn": Reason(Wait.DEMAND, "its burst buffer is being staged in"),
    "Cleaning": Reason(Wait.DEMAND, "it was requeued and its last run is being cleaned up"),
    "SchedDefer": Reason(Wait.DEMAND, "the scheduler deferred it to its next pass"),
    "BeginTime": Reason(Wait.LATER, "it asked not to start before a later time"),
    # waits on something beside the cluster's nodes
    "Dependency": Reason(Wait.OTHER, "it waits for a job it depends on"),
    "Licenses": Reason(Wait.OTHER, "it waits for a license"),
    "Reservation": Reason(Wait.OTHER, "it waits for its reservation"),
    "JobArrayTaskLimit": Reason(Wait.OTHER, "its array runs as many tasks at once as it may"),
    "BurstBufferResources": Reason(Wait.OTHER, "it waits for burst buffer space"),
    "FedJobLock": Reason(Wait.OTHER, "it waits for the federation's clusters to agree"),
    "NvidiaImexChannels": Reason(Wait.OTHER, "it waits for NVIDIA IMEX channels"),
    "MaxPoweredUpNodes": Reason(Wait.OTHER, "as many nodes are powered up as Slurm allows"),
    "MpiPortsBusy": Reason(Wait.OTHER, "it waits for MPI ports"),
    "AccountingPolicy": Reason(Wait.OTHER, "a limit of its account or QOS"),
    "QOSUsageThreshold": Reason(Wait.OTHER, "its QOS's usage is past its threshold"),
    "AssociationJobLimit": Reason(Wait.OTHER, "its account runs as many jobs as it may"),
    "AssociationResourceLimit": Reason(Wait.OTHER, "its account holds as much as it may"),
    "AssociationTimeLimit": Reason(Wait.NEVER, "its account has reached its time limit"),
    "QOSJobLimit": Reason(Wait.OTHER, "its QOS runs as many jobs as it may"),
    "QOSResourceLimit": Reason(Wait.OTHER, "its QOS holds as much as it may"),
    "QOSTimeLimit": Reason(Wait.NEVER, "its QOS has reached its time limit"),
    # never, as things stand
    "DependencyNeverSatisfied": Reason(Wait.NEVER, "a job it depends on will never satisfy it"),
    "InvalidAccount": Reason(Wait.NEVER, "its account is invalid"),
    "InvalidQOS": Reason(Wait.NEVER, "its QOS is invalid"),
    "QOSNotAllowed": Reason(Wait.NEVER, "its QOS is not allowed in its partition"),
    "AccountNotAllowed": Reason(Wait.NEVER, "its account is not allowed in its partition"),
    "BadConstraints": Reason(Wait.NEVER, "its requirements cannot be satisfied"),
    "Constraints": Reason(Wait.NEVER, "its constraints cannot be satisfied now"),
    "ReservationDeleted": Reason(Wait.NEVER, "the reservation it asked for no longer exists"),
    "ReservationInvalid": Reason(Wait.NEVER, "the reservation it asked for is invalid"),
    "PartitionDown": Reason(Wait.NEVER, "its partition is DOWN"),
    "PartitionInactive": Reason(Wait.NEVER, "its partition is INACTIVE"),
    "PartitionTimeLimit": Reason(Wait.NEVER, "its time limit exceeds its partition's"),
    "PartitionConfig": Reason(Wait.NEVER, "it breaks a limit of its partition"),
    "MaxMemPerLimit": Reason(Wait.NEVER, "it asks more memory per CPU or node than allowed"),
    "DeadLine": Reason(Wait.NEVER, "it cannot meet its deadline"),
    "BurstBufferOperation": Reason(Wait.NEVER, "an operation on its burst buffer failed"),
    # how a job's last run ended, left on a job that is pending again
    "NonZeroExitCode": Reason(Wait.OTHER, "its last run ended with a non-zero exit code"),
    "RaisedSignal": Reason(Wait.OTHER, "its last run ended on a signal"),
    "TimeLimit": Reason(Wait.OTHER, "its last run reached its time limit"),
    "OutOfMemory": Reason(Wait.OTHER, "its last run ran out of memory"),
    "SystemFailure": Reason(Wait.OTHER, "its last run ended on a failure of Slurm or a node"),
    "InactiveLimit": Reason(Wait.OTHER, "its last run reached Slurm's InactiveLimit"),
    # blocked by nodes
    "ReqNodeNotAvail": Reason(Wait.BLOCKED, "a node it needs is not available"),
    "NodeDown": Reason(Wait.BLOCKED, "a node it needs is down"),
    "PartitionNodeLimit": Reason(
        Wait.BLOCKED, "its node count is outside its partition's limits, or its nodes are down"
    ),
    # held
    "JobHeldUser": Reason(Wait.HELD, "held by its user"),
    "JobHeldAdmin": Reason(Wait.HELD, "held by an administrator"),
    "JobHoldMaxRequeue": Reason(Wait.HELD, "held after being requeued as often as allowed"),
    "JobLaunchFailure": Reason(Wait.HELD, "its launch failed"),
}

# The limit families of job_reason_codes.html, by the shape of their names (Assoc/QOS, Grp or
# Max, the resource, and whether the limit counts running work, all work, or one job).
_WHOSE = {"Assoc": "its account's", "QOS": "its QOS's", "": "its account's"}
_RUNNING, _BUDGET = Wait.OTHER, Wait.NEVER
_FAMILIES: list[tuple[re.Pattern[str], Wait, str]] = [
    (re.compile(p), wait, words)
    for p, wait, words in (
        # "... by currently running jobs": clears as running jobs end
        (r"^(Assoc|QOS)Grp\w*RunMin\w*$", _RUNNING, "{whose} running work is at its limit"),
        (r"^Max\w+RunMinsPerAccount$", _RUNNING, "its account's running work is at its limit"),
        (r"^Max\w+RunMinsPerUser$", _RUNNING, "its user's running work is at its QOS's limit"),
        # "... by past, present and future jobs": a budget used up
        (r"^(Assoc|QOS)Grp\w*Min\w*$", _BUDGET, "{whose} budget of minutes is used up"),
        # an aggregate limit on what runs at once
        (r"^(Assoc|QOS)Grp\w+$", Wait.OTHER, "{whose} limit on what runs at once is reached"),
        # per job or per node: the job itself asks too much
        (r"^(Assoc|QOS)Max\w*Per(Job|Node)\w*$", Wait.NEVER, "it asks more than {whose} limit"),
        # per user: the user's own work
        (
            r"^(Assoc|QOS)Max\w*(PerUser\w*|JobsLimit|SubmitJobLimit)$",
            Wait.OTHER,
            "its user runs as much as {whose} limit allows",
        ),
        (r"^Max\w+PerAccount$", Wait.OTHER, "its account runs as much as its QOS allows"),
        (r"^QOSMin\w+$", Wait.NEVER, "it asks less than its QOS's minimum"),
    )
]


# The resource a limit counts, from the word after Grp/Max/Min in the reason's name (the TRES of
# job_reason_codes.html); GRES on these clusters is the GPUs.
_RESOURCES = {
    "BB": "burst buffer",
    "Billing": "billing units",
    "CPU": "CPUs",
    "Cpu": "CPUs",
    "Energy": "energy",
    "GRES": "GPUs or other GRES",
    "License": "licenses",
    "Mem": "memory",
    "Node": "nodes",
    "Jobs": "jobs",
    "Submit": "submitted jobs",
    "Wall": "wall time",
}
_RESOURCE = re.compile(r"(?:Grp|Max|Min)(" + "|".join(_RESOURCES) + ")")


def reason_of(name: str) -> Reason:
    """What Slurm's reason ``name`` means; a reason not known here is unknown, not demand."""
    known = EXACT.get(name)
    if known is not None:
        return known
    for pattern, wait, words in _FAMILIES:
        match = pattern.match(name)
        if match is not None:
            whose = _WHOSE.get(match.group(1) if match.groups() else "", "its")
            said = words.format(whose=whose)
            counted = _RESOURCE.search(name)
            if counted is not None:
                said += f" ({_RESOURCES[counted.group(1)]})"
            return Reason(wait, said)
    return Reason(Wait.UNKNOWN, "a reason not known here")


# slurmctld's own words beside a reason (JOB_INFO ``state_description``):
# job_scheduler.c, a job whose partition has too few nodes in service: WAIT_RESOURCES with
# "Nodes required for job are DOWN, DRAINED[, REBOOTING] or reserved for jobs in higher
# priority partitions"
NODES_OUT = "Nodes required for job are DOWN, DRAINED"
# node_scheduler.c and reservation.c, ESLURM_RESERVATION_MAINT: WAIT_NODE_NOT_AVAIL with
# "ReqNodeNotAvail, Reserved for maintenance"
MAINTENANCE = "Reserved for maintenance"
BLOCKED_BY_NODES_OUT = Reason(
    Wait.BLOCKED,
    "nodes it needs are down, drained or reserved for jobs of higher priority partitions",
)
IN_MAINTENANCE = Reason(Wait.MAINTENANCE, "the nodes it needs are reserved for maintenance")


# job_mgr.c: a job whose launch failed (a prolog failure) is held with JobHeldUser and
# "launch failed requeued held", or "user env retrieval failed requeued held"
LAUNCH_FAILED = "failed requeued held"
HELD_AFTER_FAILED_LAUNCH = Reason(Wait.HELD, "held by Slurm after its launch failed")


def wait_of(reason: str, text: str) -> Reason:
    """What a pending job waits for, from its reason and slurmctld's words beside it: the
    ``Resources`` of a partition whose nodes are out of service is blocked, not demand, and a
    maintenance reservation is planned, not broken."""
    if MAINTENANCE in text:
        return IN_MAINTENANCE
    if reason == "JobHeldUser" and LAUNCH_FAILED in text:
        return HELD_AFTER_FAILED_LAUNCH
    if reason == "Resources" and text.startswith(NODES_OUT):
        return BLOCKED_BY_NODES_OUT
    return reason_of(reason)


# sinfo(1): MAINT "The node is currently in a reservation with a flag value of maintenance"
# (slurmrestd: NODE_STATE_MAINT, the node state flag MAINTENANCE): planned, not breakage
MAINTENANCE_FLAG = "MAINTENANCE"
