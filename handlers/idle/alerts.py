"""Idle alerts: one message per idle period, kept current, and given their buttons back
when a remedy started from them does not go through.

A sweep that finds an alert due saves the record with its ``alerted_at`` first; the post is
then owed work (``idle-alert:CLUSTER:ALERTED_AT``), posted once by the engine (looked for by
its key after a crash cut it off before its record). A sweep that finds an alert due but not
posted (a replica that died between the record and the post) owes the same item again: a key
owed before is not owed twice.

While the period lasts, each sweep redraws the open alert with its figures (how long, what
it has cost so far). An alert due again in the same period (the cooldown passed, a snooze
ran out, someone stopped keeping it) is not a new message in the channel: the reminder is
owed as a reply in the alert's thread, and the alert is drawn again with its remedies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from handlers import keeping
from handlers.changes.approvals import Approvals
from handlers.changes.delete import DELETE, plan_delete
from handlers.changes.plan import ChangePlan
from handlers.changes.resize import plan_scale_to_zero
from handlers.costs import PriceBook
from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.errors import UserError
from handlers.idle import burst as bursts
from handlers.messenger import Messenger, MessengerError
from handlers.owed import burst as rollups
from handlers.owed.engine import Attempt, Engine
from handlers.owed.model import Done, GiveUp, Later, Outcome, Owed
from handlers.owed.posting import Outbox, post_once, refused
from handlers.pacing import paced
from handlers.ports import Clock, ControlPlane, IdleRecordStore
from handlers.replies import Button, Code, Line, Reply, Strong, UserRef
from handlers.sweep.alert import IdleEntry, alert_card, closed_alert, reminder
from handlers.sweep.rules import AutoAction, IdleRecord, IdleRules, Status, Verdict

if TYPE_CHECKING:
    from handlers.sweep.observe import Note, Seen

log = logging.getLogger(__name__)
ALERT = "idle-alert"


def alert_key(cluster: str, alerted_at: float) -> str:
    return f"{ALERT}:{cluster}:{alerted_at:.3f}"


class AlertBoard:
    """The alert messages and the idle records behind them."""

    kind = ALERT
    steps = ("idle-alert-due", "idle-alert-posted")

    def __init__(
        self,
        *,
        records: IdleRecordStore,
        messenger: Messenger | None,
        channel: str | None,
        rules: IdleRules,
        clock: Clock,
        engine: Engine | None = None,
        outbox: Outbox | None = None,
    ) -> None:
        self.records = records
        self.messenger = messenger
        self.channel = channel
        self.rules = rules
        self.clock = clock
        self.engine = engine
        self.outbox = outbox  # owes a burst's roll-up
        if engine is not None:
            engine.add(self)

    @property
    def enabled(self) -> bool:
        return self.messenger is not None and self.channel is not None

    async def update(self, cluster: str, change: Callable[[IdleRecord], IdleRecord]) -> IdleRecord:
        """Change a record by compare-and-set, so that a sweep and a click never undo each
        other."""
        return await keeping.change(self.records, cluster, change, self.clock)

    async def edit(
        self, record: IdleRecord, title: str, text: Line, undo: Button | None = None
    ) -> None:
        """Replace the alert with a note that asks nothing (its buttons are gone but ``undo``,
        the one that takes the note back). Closed first in the record, so that no sweep
        draws its remedies again over the note."""
        if record.alert_open:
            await self.update(record.cluster, lambda r: replace(r, alert_open=False))
        try:
            posted = await self._posted(record)
            if posted is not None and self.messenger is not None:
                closed = closed_alert(record.cluster, title, text, undo)
                await self.messenger.update(*posted, closed)
        except MessengerError as error:
            log.warning("could not edit the alert of %s: %s", record.cluster, error.code)

    async def _posted(self, record: IdleRecord) -> tuple[str, str] | None:
        """Where the record's alert is: as recorded, or, for an alert posted and clicked on
        before its post was recorded (a moment, longer on a busy replica), looked for by its
        key in the alert channel."""
        if record.alert_message and record.alert_channel:
            return record.alert_channel, record.alert_message
        if record.alerted_at is None or self.channel is None or self.messenger is None:
            return None
        key = alert_key(record.cluster, record.alerted_at)
        thread = None if self.engine is None else await rollups.thread_of(self.engine, key)
        found = await self.messenger.find(self.channel, key, record.alerted_at - 5.0, thread)
        return (self.channel, found) if found is not None else None

    async def work(self, attempt: Attempt) -> Outcome:
        """Post the alert of one idle period's alerting (the ``idle-alert`` worker)."""
        entry = IdleEntry.from_dict(dict(attempt.subject["entry"]))
        record, _ = await self.records.get(entry.cluster)
        if record.alerted_at != attempt.subject["alerted_at"]:
            return Done("no longer due: the cluster moved on")
        if self.messenger is None or self.channel is None:
            return GiveUp("no alert channel")
        now = self.clock()
        card = alert_card(entry, now, self.rules.auto_action)
        thread = None
        burst = attempt.subject.get("burst")
        if isinstance(burst, str) and self.engine is not None:
            found = await rollups.rollup_thread(self.engine, burst)
            if found == rollups.WAIT:
                return Later(now + 2.0, "its burst's roll-up is not posted yet")
            thread = found
        try:
            if "thread" in attempt.subject:
                return await self._remind(attempt, entry, card)
            posted = await post_once(attempt, self.messenger, self.channel, card, thread=thread)
        except MessengerError as error:
            return refused(error, now, f"cannot post the idle alert in {self.channel}")
        channel = self.channel
        await self.update(
            entry.cluster,
            lambda r: replace(
                r,
                alert_message=posted,
                alert_channel=channel,
                alert_thread=thread,
                alert=entry.to_dict(),
                alert_open=True,
            ),
        )
        return Done()

    async def _remind(self, attempt: Attempt, entry: IdleEntry, card: Reply) -> Outcome:
        """The reminder of an alert due again in its period: a reply in the alert's thread,
        then the alert drawn again, current and with its remedies."""
        assert self.messenger is not None
        channel, thread = str(attempt.subject["channel"]), str(attempt.subject["thread"])
        said = reminder(entry, self.clock())
        await post_once(attempt, self.messenger, channel, said, thread=thread)
        # the alert itself: the thread's first message, or a reply in a burst's roll-up
        await self.messenger.update(channel, str(attempt.subject.get("card", thread)), card)
        await self.update(
            entry.cluster, lambda r: replace(r, alert=entry.to_dict(), alert_open=True)
        )
        return Done()

    async def post(
        self,
        entry: IdleEntry,
        alerted_at: float,
        posted: tuple[str, str, str | None] | None = None,
        burst: str | None = None,
    ) -> bool:
        """Owe the alert of the alerting at ``alerted_at`` and post it now; whether a new
        one was owed (one owed before, for the same alerting, is not owed again). With the
        period's alert ``posted`` (channel, message, the roll-up it is in), a reminder in its
        thread instead; with ``burst``, the alert goes in that roll-up's thread."""
        if self.engine is None or not self.enabled:
            return False
        item = self._alert(entry, alerted_at, posted, burst)
        self.engine.crash("idle-alert-due")  # the record says alerted; nothing owed yet
        new = await self.engine.owe(item)
        await self.engine.run(item.key)
        return bool(new)

    def _alert(
        self,
        entry: IdleEntry,
        alerted_at: float,
        posted: tuple[str, str, str | None] | None = None,
        burst: str | None = None,
    ) -> Owed:
        assert self.engine is not None
        subject: dict[str, Any] = {"entry": entry.to_dict(), "alerted_at": alerted_at}
        if posted is not None:
            channel, message, rollup = posted
            subject |= {"channel": channel, "thread": rollup or message, "card": message}
        elif burst is not None:
            subject["burst"] = burst
        return self.engine.due(ALERT, alert_key(entry.cluster, alerted_at), subject)

    async def burst(self, due: Sequence[tuple[IdleEntry, float]], at: float) -> str | None:
        """The alerts a sweep at ``at`` finds due and not posted (``due``: each entry and its
        alerting's time) that are not owed yet, owed together with their roll-up, in one
        write, and the roll-up sent: its key (None where no roll-up is made: fewer than
        ``BURST`` to owe, or no outbox, engine or channel). Those owed before keep their place."""
        engine, channel, outbox = self.engine, self.channel, self.outbox
        if len(due) < rollups.BURST or outbox is None or engine is None or channel is None:
            return None
        new = await rollups.not_owed(engine, due, lambda d: alert_key(d[0].cluster, d[1]), ALERT)
        if len(new) < rollups.BURST:
            return None
        said = bursts.rollup_reply([entry for entry, _ in new], at)
        return await rollups.owe_burst(
            outbox,
            channel,
            (rollups.rollup_key(bursts.KIND, channel, at), said),
            lambda key: (self._alert(entry, t, burst=key) for entry, t in new),
            "idle-alert-due",  # the records say alerted; nothing owed yet
        )

    async def remedy_ended(self, request: ApprovalRequest) -> None:
        """A request started from an alert ended: say how on the alert; unless it went
        through, give the alert its buttons back. Safe to call twice."""
        if request.origin not in (Origin.IDLE, Origin.IDLE_AUTO):
            return
        record, _ = await self.records.get(request.cluster)
        if record.remedy != request.id:
            return  # already handled, or a newer remedy replaced it
        what = "delete" if request.kind == DELETE.name else "scale to zero"
        if request.state == RequestState.SUCCEEDED:
            record = await self.update(request.cluster, lambda r: replace(r, remedy=None))
            title = "Deleted" if request.kind == DELETE.name else "Scaled to zero"
            await self.edit(
                record, "done", (Strong(title), ": request ", Code(request.id), " finished.")
            )
            return
        who = request.requester if request.state == RequestState.WITHDRAWN else request.decided_by
        note: Line = (
            f"The {what} request ",
            Code(request.id),
            " was ",
            Strong(str(request.state)),
            *((" by ", UserRef(who)) if who else ()),
            f": {request.outcome}" if request.outcome else "",
            ". The remedies are back.",
        )
        record = await self.update(request.cluster, lambda r: replace(r, remedy=None))
        await self.restore(record, note)

    async def refresh(self, entry: IdleEntry) -> None:
        """Draw an open alert again with this sweep's figures (how long it has been idle, what
        that cost so far); one a click closed, or whose remedy is asked, is left as it is."""
        record, _ = await self.records.get(entry.cluster)  # as it is now, not as swept
        if record.alert_open and record.remedy is None:
            await self.restore(record, (), entry)

    async def restore(self, record: IdleRecord, note: Line, entry: IdleEntry | None = None) -> None:
        """Draw the alert again with its buttons and a note: as it was posted, or with the
        figures of ``entry`` (a sweep's, which keeps it current)."""
        if not (record.alert_message and record.alert_channel and self.messenger):
            return
        if entry is None and record.alert is None:
            return
        entry = entry or IdleEntry.from_dict(dict(record.alert or {}))
        card = alert_card(entry, self.clock(), self.rules.auto_action, note=note)
        try:
            await self.messenger.update(record.alert_channel, record.alert_message, card)
        except MessengerError as error:
            log.warning("could not redraw the alert of %s: %s", record.cluster, error.code)
            return
        shown = entry.to_dict()
        await self.update(record.cluster, lambda r: replace(r, alert=shown, alert_open=True))


class Remedies:
    """Asks for an alert's remedy: plans it on the cluster as it is now, posts its card, and
    has the alert's record remember the request while it is open."""

    def __init__(
        self, board: AlertBoard, approvals: Approvals, vertex: ControlPlane, prices: PriceBook
    ) -> None:
        self.board = board
        self.approvals = approvals
        self.vertex = vertex
        self.prices = prices

    async def ask(
        self, record: IdleRecord, *, delete: bool, actor: str, origin: Origin
    ) -> ApprovalRequest:
        """Raises ``PlanError``, ``CommandError`` or ``VertexError`` when it cannot be asked."""
        cluster = await self.vertex.get_cluster(record.cluster)
        plan: ChangePlan[Any] = (
            plan_delete(cluster, self.prices)
            if delete
            else plan_scale_to_zero(cluster, self.prices)
        )
        channel = record.alert_channel or self.board.channel or ""
        request = await self.approvals.submit(actor, channel, plan, origin=origin)
        await self.board.update(record.cluster, lambda r: replace(r, remedy=request.id))
        return request


class IdleAlerts:
    """What a sweep does about each cluster's verdict: post, close, or act."""

    def __init__(self, board: AlertBoard, remedies: Remedies, clock: Clock) -> None:
        self.board = board
        self.remedies = remedies
        self.clock = clock

    async def swept(self, seen: Sequence[Seen]) -> int:
        """Each swept cluster's alert, posted, redrawn or reminded as its verdict says."""
        due = [
            (item.entry, item.record.alerted_at)
            for item in seen
            if item.entry and item.verdict and item.record and item.record.alerted_at
            if not item.record.alert_message
            if item.verdict.alert or item.verdict.status == Status.IDLE
        ]
        burst = await self.board.burst(due, self.clock()) if self.board.enabled else None
        posted = 0
        async for item in paced(seen):
            assert item.entry and item.verdict and item.record
            posted += await self.announce(item.entry, item.verdict, item.record, burst)
        return posted

    async def notes(self) -> Mapping[str, Note]:
        return {}  # nothing to say before a sweep judges its clusters

    async def observed(self, seen: Sequence[Seen]) -> None:
        """Nothing to keep: the sweep saved the idle records before."""

    async def gone(self, cluster: str) -> None:
        record, _ = await self.board.records.get(cluster)
        await self.board.edit(
            record, "deleted", (Strong("Deleted"), ": the cluster no longer exists.")
        )

    async def announce(
        self, entry: IdleEntry, verdict: Verdict, record: IdleRecord, burst: str | None = None
    ) -> int:
        """Post a due alert (in ``burst``'s roll-up thread, where the sweep made one), close
        one that no longer applies, run a due auto-action; returns how many alerts were
        posted."""
        if not self.board.enabled:
            return 0
        if verdict.ended_alert and record.alert_message and record.alert_channel:
            if verdict.status == Status.FREE:
                text: Line = (
                    Strong("Scaled to zero"),
                    ": its compute pools have no nodes, so it costs nothing now.",
                )
            else:
                text = (Strong("No longer idle"), f": {verdict.ended_alert}.")
            await self.board.edit(record, "no longer idle", text)
            await self.board.update(
                entry.cluster,
                lambda r: replace(r, alert_message=None, alert_channel=None, alert_thread=None),
            )
            return 0
        if verdict.alert:
            assert record.alerted_at is not None  # the rules set it with the alert
            if record.alert_message and record.alert_channel:
                # the period's alert exists: remind in its thread, one message per period
                posted = (record.alert_channel, record.alert_message, record.alert_thread)
                await self.board.post(entry, record.alerted_at, posted)
                return 0
            return int(await self.board.post(entry, record.alerted_at, burst=burst))
        if verdict.status == Status.IDLE and record.alerted_at and not record.alert_message:
            # alerted, and the post never recorded (its replica died between the two): owed
            # again under the same key, so posted at most once
            await self.board.post(entry, record.alerted_at)
        elif verdict.status == Status.IDLE and record.alert_message:
            await self.board.refresh(entry)
        if verdict.auto_action_due:
            await self._auto_act(entry)
        return 0

    async def _auto_act(self, entry: IdleEntry) -> None:
        record = await self.board.update(entry.cluster, lambda r: replace(r, auto_action_at=None))
        kind = self.board.rules.auto_action
        try:
            request = await self.remedies.ask(
                record, delete=kind == AutoAction.DELETE, actor="policy", origin=Origin.IDLE_AUTO
            )
            request = await self.remedies.approvals.approve_as_policy(request)
        except UserError as error:
            log.warning("auto-action on %s not taken: %s", entry.cluster, error)
            return
        text = (
            Strong("Auto-action"),
            f": no one responded, so clusterbot asked to {kind.replace('_', ' ')} (request ",
            Code(request.id),
            "); progress under its card.",
        )
        await self.board.edit(record, "auto-action", text)
