"""Pieces of the simulated slurmrestd's replies: its numbers and job states, Slurm's
compressed host lists, and the fair-share tree (``GET /slurm/vX/shares``)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

BUSY_JOB_STATES = {"RUNNING", "COMPLETING"}
# squeue(1) JOB STATE CODES: a job held after a requeue, a special exit or its reservation's
# deletion (the stand-in's own reading, not the bot's)
HELD_STATE_FLAGS = frozenset({"REQUEUE_HOLD", "SPECIAL_EXIT", "RESV_DEL_HOLD"})

# The data parsers each release ships (SchedMD/slurm src/plugins/data_parser/ at each tag)
# and the release it reports in ``meta.slurm``.
RELEASES = {
    "23.11": ("23.11.1", ("v0.0.38", "v0.0.39", "v0.0.40")),
    "24.05": ("24.05.5", ("v0.0.39", "v0.0.40", "v0.0.41")),
    "24.11": ("24.11.5", ("v0.0.40", "v0.0.41", "v0.0.42")),
    "25.05": ("25.05.4", ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43")),
    "25.11": ("25.11.0", ("v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44")),
    "26.05": ("26.05.1", ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")),
}
DEFAULT_RELEASE = "24.11"
# slurmrestd's answer to a URL it does not serve, as captured (Slurm-web
# slurm-not-found.txt): 24.11's words until 25.11 changed them.
NOT_FOUND_24 = "Unable find requested URL. Please view /openapi/v3 for API reference.\n"
NOT_FOUND_25 = (
    "Unable to find requested URL endpoint. Please query the '/openapi/v3' endpoint or visit "
    "'https://slurm.schedmd.com/rest_api.html' for the OpenAPI specification which includes a "
    "list of all possible slurmrestd endpoints.\n"
)


def number(value: int | float) -> dict[str, Any]:
    """A number as slurmrestd writes one (v0.0.40+)."""
    return {"set": True, "infinite": False, "number": value}


def states_of(job: dict[str, Any]) -> list[str]:
    state = job.get("job_state", "RUNNING")
    return [str(s) for s in state] if isinstance(state, list) else [str(state)]


def slurm_int(value: Any) -> int | None:
    """A number given wrapped (``{"set", "number"}``) or bare; None when it is not set."""
    if isinstance(value, dict):
        value = value.get("number") if value.get("set", True) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def count_of(value: Any) -> int:
    """A count such as a job's ``node_count``, 1 when it is not given."""
    found = slurm_int(value)
    return 1 if found is None else found


def _share_float(value: float, version: str) -> Any:
    """A fair-share figure as each data parser writes it: a bare float up to v0.0.41 (an
    unused association's level is infinite, which its JSON writer spells ``Infinity``, as
    Slurm 23.11's and 24.05's replies do), FLOAT64_NO_VAL's ``{"set", "infinite",
    "number"}`` since (data_parser v0.0.44 parsers.c 2616-2641: infinite is not set)."""
    if version <= "v0.0.41":
        return value
    if value == float("inf"):
        return {"set": False, "infinite": True, "number": 0.0}
    return number(value)


def share_documents(jobs: list[dict[str, Any]], version: str = "v0.0.42") -> dict[str, Any]:
    """SHARES_RESP_MSG for the accounts and users of the jobs: each account an ASSOCIATION
    row under root with equal shares, each user a USER row under its account. Usage is the
    nodes its running jobs hold (standing in for decayed usage), and the factor is the
    classic fair-share formula F = 2^(-EffectvUsage / NormShares) from Slurm's priority/
    multifactor documentation; the level (sshare's LevelFS, NormShares / EffectvUsage) of an
    association with no usage is infinite."""
    users: dict[str, set[str]] = {}
    used: dict[tuple[str, str], int] = {}
    for job in jobs:
        account, user = str(job.get("account", "default")), str(job.get("user_name", "researcher"))
        users.setdefault(account, set()).add(user)
        if BUSY_JOB_STATES & set(states_of(job)):
            count = count_of(job.get("node_count"))
            used[account, user] = used.get((account, user), 0) + count
    total = sum(used.values()) or 1
    rows: list[dict[str, Any]] = []

    def row(name: str, parent: str, kind: str, norm_shares: float, usage: int) -> None:
        effective = usage / total
        rows.append(
            {
                "id": len(rows) + 1,
                "cluster": "",
                "name": name,
                "parent": parent,
                "partition": "",
                "shares_normalized": number(round(norm_shares, 6)),
                "shares": number(1),
                "effective_usage": _share_float(round(effective, 6), version),
                "usage_normalized": number(round(effective, 6)),
                "usage": usage * 3600,
                "fairshare": {
                    "factor": _share_float(round(2 ** (-effective / norm_shares), 6), version),
                    "level": _share_float(
                        round(norm_shares / effective, 6) if effective else float("inf"), version
                    ),
                },
                "type": [kind],
            }
        )

    for account in sorted(users):
        share = 1 / len(users)
        row(
            account,
            "root",
            "ASSOCIATION",
            share,
            sum(used.get((account, u), 0) for u in users[account]),
        )
        for user in sorted(users[account]):
            row(user, account, "USER", share / len(users[account]), used.get((account, user), 0))
    return {"shares": rows, "total_shares": len(rows)}


def hostlist(names: Iterable[str]) -> str:
    """Slurm's compressed host list: ``cpu01-cpu-[0-2,5],cpu01-gpu-0``."""
    groups: dict[str, list[int]] = {}
    plain: list[str] = []
    for name in names:
        prefix, _, number = name.rpartition("-")
        if prefix and number.isdigit():
            groups.setdefault(prefix + "-", []).append(int(number))
        else:
            plain.append(name)
    parts = list(plain)
    for prefix, numbers in groups.items():
        numbers = sorted(set(numbers))
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]}")
            continue
        ranges: list[str] = []
        start = previous = numbers[0]
        for value in [*numbers[1:], None]:
            if value is not None and value == previous + 1:
                previous = value
                continue
            ranges.append(str(start) if start == previous else f"{start}-{previous}")
            if value is not None:
                start = previous = value
        parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)


def hostnames(text: str, known: Iterable[str]) -> list[str]:
    """The nodes of ``known`` a host list names (``scontrol show hostnames``), in the form
    ``hostlist`` writes: names, and ``prefix[ranges]`` groups of one bracket each. Each known
    name is matched against the list, never the list spelled out (a range may be huge)."""
    plain: set[str] = set()
    groups: list[tuple[str, list[tuple[int, int]]]] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", text):
        prefix, _, ranges = part.partition("[")
        if not ranges:
            plain.add(prefix)
            continue
        bounds = []
        for item in ranges.rstrip("]").split(","):
            first, _, last = item.partition("-")
            if first.isdigit() and (not last or last.isdigit()):
                bounds.append((int(first), int(last or first)))
        groups.append((prefix, bounds))

    def named(name: str) -> bool:
        if name in plain:
            return True
        for prefix, bounds in groups:
            rest = name[len(prefix) :]
            digits = name.startswith(prefix) and rest.isdigit()
            if digits and any(low <= int(rest) <= high for low, high in bounds):
                return True
        return False

    return [name for name in known if named(name)]


# The reasons slurmctld sets on a node itself, with reason_uid = SlurmUser (set_node_reason,
# node_mgr.c 5385-5405; drain_nodes(..., slurm_conf.slurm_user_id), proc_req.c 2413; and the
# node_mgr.c and read_config.c texts): shown as set by "slurm", not by an administrator.
SLURMCTLD_REASONS = (
    "Not responding",
    "Node unexpectedly rebooted",
    "Kill task failed",
    "Prolog error",
    "Epilog error",
    "Prolog/Epilog failure",
    "batch job complete failure",
    "Low RealMemory",
    "Low socket*core*thread count",
    "Low TmpDisk",
    "ResumeTimeout reached",
    "reboot complete",
    "reboot issued",
    "reboot timed out",
    "Duplicate jobid",
)
SLURM_USER = "slurm"  # slurm.conf SlurmUser, as Slurm's packages and images set it


def set_by_default(reason: str) -> str:
    """Who set a node's reason when nobody said: slurmctld for its own words, else root."""
    return SLURM_USER if reason.startswith(SLURMCTLD_REASONS) else "root"
