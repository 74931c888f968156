"""``/cluster audit [CLUSTER] [by USER] [since 7d]``: who did what to which cluster, newest
first, a page at a time.

Each entry names the person (a mention, which Slack shows by display name), the change itself
in words (``a4: 2 → 3 nodes``, ``PreemptMode: OFF → REQUEUE``), and for an ending its outcome
and how long the request took. **Older** shows the next page in place of this one.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from handlers.actions import AuditPage
from handlers.entities import ApprovalRequest, AuditEntry
from handlers.grammar import CommandError, cluster_word, echo
from handlers.plans import ChangePlan, PlanKind, wanted
from handlers.ports import RequestStore
from handlers.replies import Button, Buttons, Heading, Note, Reply, Text, UserRef
from handlers.words import duration

PAGE = 15
USER = re.compile(r"^<@([UW][A-Z0-9]{2,})(\|[^>]*)?>$|^([UW][A-Z0-9]{2,})$")
SINCE = re.compile(r"^(\d{1,4})([mhdw])$")
UNIT = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
LINE = 300  # characters of one entry at most
CSV_ROWS = 10_000  # entries in a CSV export at most


@dataclass(frozen=True)
class Audit:
    cluster: str | None = None
    by: str | None = None  # a user id
    since: int | None = None  # seconds back from now
    before: float | None = None  # a page: entries older than this


def parse_audit(args: list[str]) -> Audit:
    """``[CLUSTER] [by USER] [since 7d]``; USER as a mention or a user id."""
    words = list(args)
    cluster = by = since = None
    if words and words[0].lower() not in ("by", "since"):
        cluster = cluster_word(words.pop(0), "audit")
    while words:
        key = words.pop(0).lower()
        if key not in ("by", "since") or not words:
            raise CommandError(f"audit takes {echo(key)}: use by USER or since 7d", "audit")
        value = words.pop(0)
        if key == "by":
            found = USER.match(value)
            if found is None:
                raise CommandError(
                    f"{echo(value)} is not a person: mention them (@name) or give their user id",
                    "audit",
                )
            by = found.group(1) or found.group(3)
        else:
            found = SINCE.match(value.lower())
            if found is None:
                raise CommandError(f"{echo(value)} is not a time back such as 7d or 12h", "audit")
            since = int(found.group(1)) * UNIT[found.group(2)]
    return Audit(cluster, by, since)


def change_words(plan: ChangePlan) -> str:
    """The change itself, in words."""
    if plan.kind == PlanKind.RESIZE:
        return "; ".join(c.words for c in plan.changed_pools) or wanted(plan)
    if plan.kind == PlanKind.DELETE:
        return "delete the cluster"
    if plan.kind == PlanKind.RESTORE:
        return "create it again from its kept spec"
    return wanted(plan)


def _details(entry: AuditEntry) -> dict[str, object]:
    try:
        details = json.loads(entry.details or "{}")
    except ValueError:
        return {}
    return details if isinstance(details, dict) else {}


def _entry(entry: AuditEntry, request: ApprovalRequest | None) -> Text:
    when = datetime.fromtimestamp(entry.at, UTC).strftime("%b %d %H:%M")
    cluster = entry.cluster.rsplit("/", 1)[-1]
    words = [f" {entry.action} ", cluster]
    if request is not None:
        words.append(f": {change_words(request.plan)}")
    details = _details(entry)
    if details.get("outcome"):
        words.append(f" · {details['outcome']}")
    if request is not None and request.finished_at and entry.at >= request.finished_at - 1:
        words.append(f" · took {duration(request.finished_at - request.created_at)}")
    text = "".join(words)
    if len(text) > LINE:
        text = text[: LINE - 1] + "…"
    return Text(f"{when}  ", UserRef(entry.actor), text)


class AuditLog:
    def __init__(self, source: RequestStore) -> None:
        self.source = source

    async def page(self, query: Audit, now: float) -> Reply:
        after = now - query.since if query.since else None
        entries = await self.source.audit_log(
            query.cluster, PAGE + 1, actor=query.by, after=after, before=query.before
        )
        more, entries = len(entries) > PAGE, entries[:PAGE]
        title = f"Audit log for {query.cluster}" if query.cluster else "Audit log"
        reply = Reply(title).add(Heading(title))
        if query.by:
            reply.add(Text("By ", UserRef(query.by), "."))
        if not entries:
            older = " older" if query.before else ""
            return reply.add(Text(f"No{older} entries."))
        requests: dict[str, ApprovalRequest | None] = {}
        for entry in entries:
            if entry.request_id and entry.request_id not in requests:
                requests[entry.request_id] = await self.source.get_request(entry.request_id)
        for entry in entries:
            reply.add(_entry(entry, requests.get(entry.request_id or "")))
        reply.add(Note("Newest first, times in UTC."))
        buttons = [Button(AuditPage(None, query.cluster, query.by, query.since, True), "CSV")]
        if more:
            next_page = AuditPage(entries[-1].at, query.cluster, query.by, query.since)
            buttons.insert(0, Button(next_page, "Older"))
        return reply.add(Buttons(tuple(buttons), block_id="audit-page"))

    async def csv(self, query: Audit, now: float) -> tuple[str, str, int]:
        """The log so filtered, up to ``CSV_ROWS`` entries, newest first: (file name, text,
        rows)."""
        after = now - query.since if query.since else None
        entries = await self.source.audit_log(
            query.cluster, CSV_ROWS, actor=query.by, after=after, before=None
        )
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(
            ["time_utc", "actor", "action", "cluster", "request", "change", "outcome", "took_s"]
        )
        requests: dict[str, ApprovalRequest | None] = {}
        for entry in entries:
            rid = entry.request_id or ""
            if rid and rid not in requests:
                requests[rid] = await self.source.get_request(rid)
            request = requests.get(rid)
            outcome = _details(entry).get("outcome") or ""
            took = ""
            if request is not None and request.finished_at and entry.at >= request.finished_at - 1:
                took = f"{request.finished_at - request.created_at:.0f}"
            writer.writerow(
                [
                    datetime.fromtimestamp(entry.at, UTC).strftime("%Y-%m-%d %H:%M:%S"),
                    entry.actor,
                    entry.action,
                    entry.cluster,
                    rid,
                    change_words(request.plan) if request is not None else "",
                    outcome,
                    took,
                ]
            )
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d-%H%M")
        scope = f"-{query.cluster}" if query.cluster else ""
        return f"audit{scope}-{stamp}.csv", out.getvalue(), len(entries)
