"""Slurm's reservations in the simulator: kept per cluster (fixtures key ``reservations``,
``POST /_sim/reservations``), served as slurmrestd's ``GET /slurm/vX/reservations/``, and
felt by nodes and jobs as slurmctld makes them felt.

From Slurm's source and pages (SchedMD/slurm 284c3b95):
- data_parser v0.0.44 ``PARSER_ARRAY(RESERVATION_INFO)`` (parsers.c 9223-9246): the fields of
  a reservation, ``start_time`` and ``end_time`` as TIMESTAMP_NO_VAL, ``flags`` from
  ``RESERVATION_FLAGS`` (``MAINT``, ``IGNORE_JOBS``, ``DAILY``...);
- sinfo(1): a node "in an advanced reservation" is RESV (slurmrestd flag RESERVED), and MAINT
  (flag MAINTENANCE) "in a reservation with a flag value of maintenance";
- job_reason_codes.html: Reservation, "The job is waiting for its advanced reservation to
  become available";
- node_scheduler.c and reservation.c: a job that is not in a maintenance reservation and
  needs its nodes waits with ReqNodeNotAvail, "Reserved for maintenance".
Times in a fixture are epoch seconds, RFC 3339, or ``now``, ``now+2h``, ``now-30m`` (``s``,
``m``, ``h``, ``d``), read when the reservation is set.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from bot.sandbox.controlplane import rpc
from bot.sandbox.controlplane.slurm_parts import number

FLAGS = frozenset(
    {
        "MAINT",
        "DAILY",
        "WEEKLY",
        "WEEKDAY",
        "WEEKEND",
        "HOURLY",
        "IGNORE_JOBS",
        "ANY_NODES",
        "STATIC",
        "PART_NODES",
        "OVERLAP",
        "SPEC_NODES",
        "TIME_FLOAT",
        "REPLACE",
        "REPLACE_DOWN",
        "PURGE_COMP",
        "FLEX",
        "MAGNETIC",
        "NO_HOLD_JOBS_AFTER_END",
        "USER_DELETE",
    }
)
_RELATIVE = re.compile(r"^now(?:([+-])(\d+)([smhd]))?$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
FIELDS = {"name", "start_time", "end_time", "node_list", "flags", "partition", "users"}


def moment(value: Any, now: float, what: str) -> int:
    """A fixture's time as epoch seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        relative = _RELATIVE.match(value.strip())
        if relative is not None:
            sign, amount, unit = relative.groups()
            shift = int(amount or 0) * _UNITS.get(unit or "s", 1)
            return int(now + (-shift if sign == "-" else shift))
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
        except ValueError:
            pass
    raise rpc.invalid(f"{what} must be epoch seconds, RFC 3339 or now[+-]N(s|m|h|d)")


def read_spec(item: Any, now: float) -> dict[str, Any]:
    """One reservation as a fixture or ``/_sim/reservations`` gives it, checked."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise rpc.invalid("each reservation needs a name")
    unknown = set(item) - FIELDS
    if unknown:
        raise rpc.invalid(
            f"reservation {item['name']}: unknown fields {', '.join(sorted(unknown))}"
        )
    flags = item.get("flags") or []
    flags = [flags] if isinstance(flags, str) else flags
    if not isinstance(flags, list) or set(map(str, flags)) - FLAGS:
        raise rpc.invalid(
            f"reservation {item['name']}: flags must be among {', '.join(sorted(FLAGS))}"
        )
    start = moment(item.get("start_time", "now"), now, "start_time")
    end = moment(item.get("end_time", "now+1d"), now, "end_time")
    if end <= start:
        raise rpc.invalid(f"reservation {item['name']}: end_time must be after start_time")
    return {
        "name": item["name"],
        "start_time": start,
        "end_time": end,
        "node_list": str(item.get("node_list") or ""),
        "flags": [str(f) for f in flags],
        "partition": str(item.get("partition") or ""),
        "users": str(item.get("users") or ""),
    }


def active(reservation: dict[str, Any], now: float) -> bool:
    return bool(reservation["start_time"] <= now < reservation["end_time"])


def node_flags(
    reservations: list[dict[str, Any]], nodes: dict[str, list[str]], now: float
) -> dict[str, list[str]]:
    """The state flags each node has from the reservations active now: RESERVED, and
    MAINTENANCE in a maintenance window. ``nodes``: each reservation's node names."""
    flags: dict[str, list[str]] = {}
    for reservation in reservations:
        if not active(reservation, now):
            continue
        extra = ["RESERVED"] + (["MAINTENANCE"] if "MAINT" in reservation["flags"] else [])
        for node in nodes.get(reservation["name"], []):
            flags[node] = list(dict.fromkeys(flags.get(node, []) + extra))
    return flags


def document(reservation: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """A whole RESERVATION_INFO, every field of the v0.0.42-v0.0.44 data parsers."""
    unset = {"set": False, "infinite": False, "number": 0}
    return {
        "accounts": "",
        "burst_buffer": "",
        "core_count": 0,
        "core_specializations": [],
        "end_time": number(reservation["end_time"]),
        "features": "",
        "flags": list(reservation["flags"]) or ["SPEC_NODES"],
        "groups": "",
        "licenses": "",
        "max_start_delay": 0,
        "name": reservation["name"],
        "node_count": len(names),
        "node_list": reservation["node_list"],
        "partition": reservation["partition"],
        "purge_completed": {"time": unset},
        "start_time": number(reservation["start_time"]),
        "tres": f"cpu={8 * len(names)}",
        "users": reservation["users"] or "root",
    }
