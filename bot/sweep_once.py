"""`clusterbot sweep --once`: one idle sweep, reported on stdout (text or JSON).

Records are kept in the configured database, so runs from cron build the same history the
service does. Alerts go to Slack only when a bot token and an alert channel are configured.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bot.app import ClusterbotService
from bot.settings import Settings
from handlers.cards import duration
from handlers.costs import money
from handlers.policy import Policy
from handlers.sweep import SweepReport


def as_json(report: SweepReport) -> dict[str, Any]:
    return {
        "started": report.started,
        "finished": report.finished,
        "alerts": report.alerts,
        "failures": report.failures,
        "clusters": [
            {
                "cluster": e.cluster,
                "target": e.target,
                "status": str(e.verdict.status),
                "reason": e.verdict.reason,
                "idle_since": e.verdict.idle_since,
                "nodes": e.nodes,
                "cost_per_hour": e.cost_hour,
                "recommendation": e.verdict.recommendation,
                "recommendation_reason": e.verdict.recommendation_reason,
            }
            for e in report.entries
        ],
    }


def as_text(report: SweepReport, now: float) -> str:
    lines = [f"{'CLUSTER':<10} {'TARGET':<28} {'STATUS':<8} {'IDLE FOR':>12} {'$/H':>10}  WHY"]
    for entry in sorted(report.entries, key=lambda e: (e.verdict.status, e.cluster_id)):
        since = entry.verdict.idle_since
        age = duration(now - since) if since is not None else "-"
        lines.append(
            f"{entry.cluster_id:<10} {entry.target:<28} {entry.verdict.status:<8} {age:>12} "
            f"{money(entry.cost_hour, per_hour=False):>10}  {entry.verdict.reason}"
        )
    lines += [f"! {failure}" for failure in report.failures]
    lines.append(
        f"{len(report.entries)} clusters, {report.alerts} alerts posted, "
        f"{report.finished - report.started:.1f} s"
    )
    return "\n".join(lines)


async def sweep_once(settings: Settings, policy: Policy, *, as_json_output: bool) -> str:
    service = ClusterbotService(settings, policy)
    alerts = settings.slack_bot_token is not None and settings.alert_channel is not None
    await service.store.migrate()
    try:
        report = await service.sweeper.sweep(alerts=alerts)
    finally:
        await service.vertex.aclose()
        await service.store.close()
    if as_json_output:
        return json.dumps(as_json(report), indent=2)
    return as_text(report, time.time())
