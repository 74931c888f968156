"""slurm.conf settings in a cluster's ``config`` map: which keys the bot refuses before a card
is posted, the values it checks, and a one-line meaning for the keys the orchestration
document uses as examples.

The provider schema (``orchestratorSpec.slurmSpec.config``): keys are Slurm parameter names
as SchedMD documents them (https://slurm.schedmd.com/slurm.conf.html), matched
case-insensitively; parameters the service manages itself are rejected at request time. The
control plane remains the judge of every other key: one it refuses ends the request as "not
applied" with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from handlers.domain.models import Cluster, OrchestratorSpec, SlurmSpec


def normal(key: str) -> str:
    """How keys are compared: case-insensitively, ignoring underscores."""
    return key.lower().replace("_", "")


# Set by the service itself (the manage-clusters-slurm reference: prolog and epilog scripts
# have fields of their own; the health check, requeue, the controller, accounting storage
# and its purge settings belong to the service).
MANAGED = frozenset(
    normal(k)
    for k in [
        "Prolog",
        "Epilog",
        "PrologSlurmctld",
        "EpilogSlurmctld",
        "HealthCheckProgram",
        "HealthCheckInterval",
        "HealthCheckNodeState",
        "RequeueExit",
        "ClusterName",
        "SlurmctldHost",
        "SlurmctldPort",
        "SlurmdPort",
        "SlurmUser",
        "SlurmdUser",
        "StateSaveLocation",
        "SlurmdSpoolDir",
        "AuthType",
        "CredType",
        "AccountingStorageType",
        "AccountingStorageHost",
        "AccountingStoragePort",
        "AccountingStoragePass",
        "AccountingStorageUser",
        "PurgeJobAfter",
        "PurgeStepAfter",
        "PurgeEventAfter",
        "PurgeResvAfter",
        "PurgeSuspendAfter",
        "PurgeTXNAfter",
        "PurgeUsageAfter",
    ]
)
KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]{1,63}$")
# slurm.conf time values: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], or -1/UNLIMITED
SLURM_TIME = re.compile(
    r"^(-1|UNLIMITED|INFINITE|\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+(:\d{2}(:\d{2})?)?)$",
    re.IGNORECASE,
)


def _integer(value: str) -> str | None:
    return None if value.isascii() and value.isdigit() else "a whole number"


def _one_of(*choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        words = [w.strip().upper() for w in value.split(",")]
        if all(w in choices for w in words):
            return None
        return "one of " + ", ".join(choices) + " (several joined by commas)"

    return check


def _exactly(*choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value in choices else "one of " + ", ".join(choices)

    return check


def _time(value: str) -> str | None:
    return None if SLURM_TIME.match(value) else "a Slurm time: minutes, HH:MM:SS or D-HH:MM:SS"


@dataclass(frozen=True)
class Known:
    name: str  # as SchedMD spells it
    meaning: str
    check: Callable[[str], str | None] | None = None


# The orchestration document's examples, with what they do.
KNOWN = {
    normal(k.name): k
    for k in (
        Known(
            "AccountingStorageEnforce",
            "jobs must fit their account's and QOS's limits to be accepted",
        ),
        Known(
            "PriorityType",
            "priority/multifactor orders the queue by age, fair share, job size, partition "
            "and QOS instead of first come, first served",
            _exactly("priority/basic", "priority/multifactor"),
        ),
        Known(
            "PriorityWeightAge", "how much waiting in the queue raises a job's priority", _integer
        ),
        Known(
            "PriorityWeightFairshare",
            "how much an account's unused fair share raises its jobs' priority",
            _integer,
        ),
        Known("PriorityWeightJobSize", "how much a job's size changes its priority", _integer),
        Known("PriorityWeightPartition", "how much the partition's tier raises priority", _integer),
        Known("PriorityWeightQOS", "how much the job's QOS raises its priority", _integer),
        Known(
            "PreemptType",
            "what decides who may preempt whom: QOS or partition priority",
            _exactly("preempt/none", "preempt/partition_prio", "preempt/qos"),
        ),
        Known(
            "PreemptMode",
            "what happens to a preempted job: REQUEUE puts it back in the queue, CANCEL "
            "ends it, SUSPEND pauses it",
            _one_of("OFF", "CANCEL", "GANG", "REQUEUE", "SUSPEND", "WITHIN", "PRIORITY"),
        ),
        Known(
            "PreemptExemptTime",
            "a job runs at least this long before it can be preempted",
            _time,
        ),
    )
}


class SettingError(ValueError):
    """A setting the bot refuses before any card; the message is for the user."""


def canonical(key: str) -> str:
    """The key as SchedMD spells it when known, else as typed."""
    known = KNOWN.get(normal(key))
    return known.name if known else key


def check_setting(key: str, value: str | None) -> None:
    """Refuse a key the service manages, a malformed key, or a known key's bad value."""
    if not KEY.match(key):
        raise SettingError(f"{key[:40]!r} is not a slurm.conf parameter name")
    if normal(key) in MANAGED:
        raise SettingError(
            f"{key} is managed by the service and cannot be set here"
            + (" (use the prolog/epilog scripts)" if "log" in normal(key) else "")
        )
    known = KNOWN.get(normal(key))
    if value is None or known is None or known.check is None:
        return
    if not value:
        raise SettingError(f"{known.name} needs a value")
    wanted = known.check(value)
    if wanted is not None:
        raise SettingError(f"{known.name}={value[:40]} is not valid: use {wanted}")


def meaning(key: str) -> str | None:
    known = KNOWN.get(normal(key))
    return known.meaning if known else None


class SettingChange(BaseModel):
    """One slurm.conf key: its value before and after (None: not set)."""

    model_config = ConfigDict(frozen=True)

    key: str
    before: str | None
    after: str | None

    @property
    def words(self) -> str:
        if self.after is None:
            return f"unset {self.key} (was {self.before})"
        if self.before is None:
            return f"set {self.key} = {self.after}"
        return f"{self.key}: {self.before} → {self.after}"


def setting_changes(
    config: Mapping[str, str], sets: Mapping[str, str], unsets: Sequence[str]
) -> list[SettingChange]:
    """What setting ``sets`` and removing ``unsets`` changes in ``config``; raises
    ``SettingError`` for a refused key or value, an unset of a key that is not set, or
    nothing to change."""
    current = {normal(k): (k, v) for k, v in config.items()}
    changes: list[SettingChange] = []
    for key, value in sets.items():
        check_setting(key, value)
        before = current.get(normal(key), (key, None))[1]
        if before != value:
            changes.append(SettingChange(key=canonical(key), before=before, after=value))
    for key in unsets:
        check_setting(key, None)
        if normal(key) not in current:
            raise SettingError(f"{key} is not set")
        name, before = current[normal(key)]
        changes.append(SettingChange(key=name, before=before, after=None))
    if not changes:
        raise SettingError("these settings are already in place: nothing would change")
    return changes


def config_after(config: Mapping[str, str], settings: Sequence[SettingChange]) -> dict[str, str]:
    """``config`` with the settings made (keys matched as Slurm does, case-insensitively)."""
    result = dict(config)
    for change in settings:
        for key in [k for k in result if normal(k) == normal(change.key)]:
            del result[key]
        if change.after is not None:
            result[change.key] = change.after
    return result


def same_config(one: Mapping[str, str], other: Mapping[str, str]) -> bool:
    """Equal as Slurm reads them: keys case-insensitively."""
    return {normal(k): v for k, v in one.items()} == {normal(k): v for k, v in other.items()}


def slurm_copy(cluster: Cluster) -> tuple[Cluster, SlurmSpec]:
    """A deep copy of the cluster to PATCH, and its Slurm spec (made when absent) to change:
    every other field, known or not, stays as read."""
    changed = cluster.model_copy(deep=True)
    if changed.orchestrator_spec is None:
        changed.orchestrator_spec = OrchestratorSpec()
    if changed.orchestrator_spec.slurm_spec is None:
        changed.orchestrator_spec.slurm_spec = SlurmSpec()
    return changed, changed.orchestrator_spec.slurm_spec
