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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from handlers.actions import AuditPage
from handlers.changes.kinds import kind_of
from handlers.changes.plan import ChangePlan
from handlers.entities import ApprovalRequest, AuditEntry, RequestState
from handlers.grammar import CommandError, cluster_word, echo, time_back
from handlers.ports import RequestStore
from handlers.replies import Button, Buttons, Heading, Note, Reply, Text, UserRef
from handlers.words import duration

PAGE = 15
LINE = 300  # characters of one entry at most
CSV_ROWS = 10_000  # entries in a CSV export at most


@dataclass(frozen=True)
class Audit:
    cluster: str | None = None
    by: str | None = None  # a person: as typed when parsed, their id once read
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
            by = value  # a person as typed: who it names is the platform's to say
        else:
            since = time_back(value, "audit")
    return Audit(cluster, by, since)


def change_words(plan: ChangePlan[Any]) -> str:
    """The change itself, in words."""
    return kind_of(plan).words(plan)


def _details(entry: AuditEntry) -> dict[str, object]:
    try:
        details = json.loads(entry.details or "{}")
    except ValueError:
        return {}
    return details if isinstance(details, dict) else {}


def _took(entry: AuditEntry, request: ApprovalRequest | None) -> float | None:
    """How long the request took, on the entry that ended it (None on any other)."""
    if request is None or not request.finished_at or entry.at < request.finished_at - 1:
        return None
    if entry.action not in ENDINGS:  # an entry of the same second that ended nothing
        return None
    return request.finished_at - request.created_at


# What each stored action says in the log, in words (the CSV keeps the stored names).
ACTION_WORDS = {
    "requested": "asked for",
    "approved": "approved",
    "approval_refused": "was refused approving",
    "rejected": "rejected",
    "withdrawn": "withdrew",
    "expired": "— expired:",
    "operation_started": "started",
    "succeeded": "— done:",
    "failed": "— failed:",
    "refused": "— not applied:",
    "unknown": "— outcome unknown:",
    "abandoned": "— abandoned:",
}


# The entries that end a request: each is named for the state it ended in.
ENDINGS = frozenset(str(state) for state in RequestState if not state.open)


def action_words(action: str) -> str:
    return ACTION_WORDS.get(action, action.replace("_", " "))


def _entry(entry: AuditEntry, request: ApprovalRequest | None) -> Text:
    when = datetime.fromtimestamp(entry.at, UTC).strftime("%b %d %H:%M")
    cluster = entry.cluster.rsplit("/", 1)[-1]
    words = [f" {action_words(entry.action)} ", cluster]
    if request is not None:
        words.append(f": {change_words(request.plan)}")
    details = _details(entry)
    if details.get("outcome"):
        words.append(f" · {details['outcome']}")
    took = _took(entry, request)
    if took is not None:
        words.append(f" · took {duration(took)}")
    text = "".join(words)
    if len(text) > LINE:
        text = text[: LINE - 1] + "…"
    return Text(f"{when}  ", UserRef(entry.actor), text)


class AuditLog:
    def __init__(self, source: RequestStore) -> None:
        self.source = source

    async def _entries(self, query: Audit, now: float, limit: int) -> list[AuditEntry]:
        after = now - query.since if query.since else None
        return await self.source.audit_log(
            query.cluster, limit, actor=query.by, after=after, before=query.before
        )

    async def _requests(self, entries: list[AuditEntry]) -> dict[str, ApprovalRequest]:
        """The request behind each entry, all read together."""
        return await self.source.get_requests([e.request_id for e in entries if e.request_id])

    async def page(self, query: Audit, now: float) -> Reply:
        entries = await self._entries(query, now, PAGE + 1)
        more, entries = len(entries) > PAGE, entries[:PAGE]
        title = f"Audit log for {query.cluster}" if query.cluster else "Audit log"
        reply = Reply(title).add(Heading(title))
        if query.by:
            reply.add(Text("By ", UserRef(query.by), "."))
        if not entries:
            older = " older" if query.before else ""
            return reply.add(Text(f"No{older} entries."))
        requests = await self._requests(entries)
        for entry in entries:
            reply.add(_entry(entry, requests.get(entry.request_id or "")))
        reply.add(Note("Newest first, times in UTC."))
        buttons = [Button(AuditPage(None, query.cluster, query.by, query.since, True), "CSV")]
        if more:
            next_page = AuditPage(entries[-1].at, query.cluster, query.by, query.since)
            buttons.insert(0, Button(next_page, "Older"))
        return reply.add(Buttons(tuple(buttons)))

    async def csv(self, query: Audit, now: float) -> tuple[str, str, int]:
        """The log so filtered, up to ``CSV_ROWS`` entries, newest first: (file name, text,
        rows)."""
        entries = await self._entries(query, now, CSV_ROWS)
        requests = await self._requests(entries)
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(
            ["time_utc", "actor", "action", "cluster", "request", "change", "outcome", "took_s"]
        )
        for entry in entries:
            rid = entry.request_id or ""
            request = requests.get(rid)
            outcome = _details(entry).get("outcome") or ""
            took = _took(entry, request)
            writer.writerow(
                [
                    datetime.fromtimestamp(entry.at, UTC).strftime("%Y-%m-%d %H:%M:%S"),
                    entry.actor,
                    entry.action,
                    entry.cluster,
                    rid,
                    change_words(request.plan) if request is not None else "",
                    outcome,
                    "" if took is None else f"{took:.0f}",
                ]
            )
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d-%H%M")
        scope = f"-{query.cluster}" if query.cluster else ""
        return f"audit{scope}-{stamp}.csv", out.getvalue(), len(entries)
