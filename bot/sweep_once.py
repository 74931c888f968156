"""`clusterbot sweep --once`: one idle sweep, reported on stdout (text or JSON).

Records are kept in the same database as `serve` (``CLUSTERBOT_DATABASE_URL``, by default a
file in the state folder, never the working directory), so runs from cron build the same
history the service does; the report says which database it used. Alerts go to Slack only
when a bot token and an alert channel are configured.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bot.app import ClusterbotService
from bot.settings import Settings
from bot.store import shown
from handlers.costs import money
from handlers.domain.errors import CredentialsError
from handlers.idle.capability import IDLE
from handlers.policy import Policy
from handlers.sweep.health import ClusterHealth
from handlers.sweep.reach import Reach
from handlers.sweep.report import SweepReport
from handlers.words import duration


class SweepFailedError(Exception):
    """The sweep could not run at all; the message is one line for the person running it."""


def as_json(report: SweepReport, database: str) -> dict[str, Any]:
    return {
        "database": database,
        "started": report.started,
        "finished": report.finished,
        "alerts": report.alerts,
        "failures": report.failures,
        "clusters": [
            {
                "cluster": e.cluster,
                "target": e.target,
                "status": str(e.status),
                "reason": e.reason,
                "idle_since": e.idle_since,
                "nodes": e.nodes,
                "cost_per_hour": e.cost_hour,
                "saving_if_scaled_to_zero": e.freed_hour,
                "reservations": list(e.reservations),
                "jobs_hidden": e.jobs_hidden,
                "recommendation": str(e.recommendation) if e.recommendation else None,
                "recommendation_reason": e.recommendation_reason or None,
                # null when the sweep did not read it (the cluster was not running)
                "health": ClusterHealth.from_dict(e.health).shown() if e.health else None,
                # running jobs whose GPUs stayed idle for the window (handlers/sweep/gpus.py)
                "idle_allocations": list(e.idle_allocations),
            }
            for e in report.entries
        ],
    }


def as_text(report: SweepReport, now: float, database: str) -> str:
    lines = [f"{'CLUSTER':<10} {'TARGET':<28} {'STATUS':<8} {'QUIET FOR':>12} {'$/H':>10}  WHY"]
    for entry in sorted(report.entries, key=lambda e: (e.status, e.cluster_id)):
        since = entry.idle_since
        age = duration(now - since) if since is not None else "-"
        lines.append(
            f"{entry.cluster_id:<10} {entry.target:<28} {entry.status:<8} {age:>12} "
            f"{money(entry.cost_hour, per_hour=False):>10}  {entry.reason}"
        )
    lines += [f"! {failure}" for failure in report.failures]
    lines.append(
        f"{len(report.entries)} clusters, {report.alerts} alerts posted, "
        f"{report.finished - report.started:.1f} s; database {database}"
    )
    return "\n".join(lines)


async def sweep_once(settings: Settings, policy: Policy, *, as_json_output: bool) -> str:
    service = ClusterbotService(settings, policy, owner=f"sweep-once-{time.time_ns()}")
    database = shown(settings.database_url)
    service.open_http()
    try:
        try:
            await service.vertex.check_credentials()
        except CredentialsError as error:
            raise SweepFailedError(error.user_message) from None
        try:
            await service.store.migrate()
        except Exception as error:
            raise SweepFailedError(
                f"the database {database} cannot be opened: {type(error).__name__}"
            ) from None
        alerts = service.core.of(IDLE).board.enabled  # where there is an alert channel
        report = await service.core.sweeper.sweep(alerts=alerts, force=True)
        if report is None:
            raise SweepFailedError("another sweep is running on this database; try again shortly")
        if Reach(report.finished, report.targets, report.unreadable_targets).blind:
            reasons = "; ".join(f"{t}: {why}" for t, why in report.unreadable_targets.items())
            raise SweepFailedError(f"no target could be read ({reasons})")
    finally:
        await service.close_connections()
    if as_json_output:
        return json.dumps(as_json(report, database), indent=2)
    return as_text(report, time.time(), database)
