"""Health alerts: one message per episode, in the alert channel or the channel the policy
names for the cluster, posted once and edited as the episode changes and when it heals.

Each sweep advances each cluster's episode and saves it in health's record of the cluster
with ``owed`` set *before* the alert is drawn; then the drawing is owed work
(``health-alert:CLUSTER:OPENED:SEEN``, one per state of the episode), done by the engine on
whichever replica gets to it, which clears ``owed`` by compare-and-set once it has. A crash
between the post and its record is settled by looking for the post by its key; a rate limit
or a passing failure delays the alert, never loses it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from handlers.domain.names import target_of
from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.health import burst as bursts
from handlers.health import episodes
from handlers.health.alert import gone_card, health_card
from handlers.health.channels import HealthPolicy
from handlers.health.episodes import HealthRecord
from handlers.health.kinds import DRAIN, RESUME
from handlers.keeping import Kept, change, save_all
from handlers.messenger import MessageId, Messenger, MessengerError
from handlers.owed.burst import BURST, WAIT, not_owed, owe_burst, rollup_key, rollup_thread
from handlers.owed.engine import Attempt, Engine
from handlers.owed.model import Done, GiveUp, Later, Outcome, Owed
from handlers.owed.posting import Outbox, refused
from handlers.owed.wire import decode, encode
from handlers.pacing import paced
from handlers.ports import Clock

if TYPE_CHECKING:
    from handlers.sweep.observe import Note, Seen
from handlers.replies import Code, Line, Reply, Strong, UserRef

log = logging.getLogger(__name__)


KIND = "health-alert"
EPISODES = "episodes"  # the sweep report's count of the episodes this sweep opened and healed
COUNTED = {
    episodes.Change.OPENED: "opened",
    episodes.Change.REOPENED: "opened",  # back within the quiet period: opened again
    episodes.Change.HEALED: "healed",
}


Episode = episodes.Episode


def _marked(record: HealthRecord, episode: Episode, at: float) -> HealthRecord:
    """The record with its episode's post marked as sent at ``at``: the same episode only,
    and only when no drawing marked or posted it first (the record is then unchanged)."""
    now = record.episode
    if now is None or now.opened_at != episode.opened_at or now.posting or now.alert_message:
        return record
    return replace(record, episode=replace(now, posting=at))


def _to_post(episode: Episode, now: float) -> bool:
    """Whether the episode's alert is owed and not posted yet (nor on its way)."""
    snoozed = episode.snoozed_until is not None and episode.snoozed_until > now
    return (
        episode.owed
        and episode.open
        and not episode.alert_message
        and not snoozed
        and (not episode.posting)
    )


def drawn_as(episode: Episode) -> str:
    """What the episode's alert shows, in a few characters: a new state of the episode is a
    new drawing owed, the same state drawn again is not."""
    shown = {
        k: v
        for k, v in episode.to_dict().items()
        if k not in ("owed", "posting", "alert_message", "alert_channel")
    }
    text = json.dumps(shown, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class HealthAlerts:
    """Health alerts, and the ``health-alert`` worker that draws them."""

    kind = KIND
    steps = ("health-alert-posted",)

    def __init__(
        self,
        *,
        records: Kept[HealthRecord],
        messenger: Messenger,
        channel: str | None,
        policy: HealthPolicy,
        clock: Clock,
        engine: Engine,
        outbox: Outbox,
        interval: float,
    ) -> None:
        self.records = records
        self.interval = interval  # the sweep's: what a sweep saw holds until the next
        self.messenger = messenger
        self.channel = channel
        self.policy = policy
        self.clock = clock
        self.engine = engine
        self.outbox = outbox
        self._drawing: dict[str, asyncio.Lock] = {}  # per cluster
        engine.add(self)

    def channel_of(self, record: HealthRecord) -> str | None:
        """Where the cluster's health alert is (or goes): its episode's alert's channel, else
        the one the policy names for the cluster, else the alert channel."""
        episode = record.episode
        if episode is not None and episode.alert_channel:
            return episode.alert_channel
        return self.policy.channel_for(record.cluster.rsplit("/", 1)[-1]) or self.channel

    async def update(
        self, cluster: str, how: Callable[[HealthRecord], HealthRecord]
    ) -> HealthRecord:
        """Change a cluster's record by compare-and-set: a sweep and a click never undo
        each other."""
        return await change(self.records, cluster, how, self.clock)

    async def notes(self) -> Mapping[str, Note]:
        return {}  # nothing to say before a sweep judges its clusters

    async def observed(self, seen: Sequence[Seen]) -> None:
        """Each swept cluster's episode advanced by what the sweep saw, all saved in one
        transaction before any alert is drawn."""
        items = {item.cluster.name: item for item in seen}

        def advanced(cluster: str, record: HealthRecord) -> HealthRecord:
            return HealthRecord(cluster, self._episode(record.episode, items[cluster]))

        await save_all(self.records, list(items), advanced, self.clock)

    def _episode(self, before: Episode | None, item: Seen) -> Episode | None:
        """The cluster's episode after this sweep: its alert is owed when it changed, and a
        posted alert of an open episode at every sweep, so that its figures (for how long,
        what it has cost) are current. A snooze carries into a new episode."""
        health = item.observation.health
        if health is None:  # not read this sweep: nothing is known to have changed
            return before
        episode, change = episodes.advance(
            before, item.cluster.name, health, item.observation.at, self.interval
        )
        if change in COUNTED:
            item.marks[EPISODES] = COUNTED[change]
        else:  # a record assessed again (a click meanwhile) keeps only its last mark
            item.marks.pop(EPISODES, None)
        if episode is None:
            return None
        if before is not None and episode.opened_at != before.opened_at:
            episode = replace(episode, snoozed_until=before.snoozed_until)
        current = (
            episode.open
            and episode.alert_message is not None
            and (before is None or drawn_as(episode) != drawn_as(before))
        )
        owed = episode.owed or current or change != episodes.Change.NONE
        if not episode.open and not owed:
            return episode
        return replace(episode, owed=owed, health=health.to_dict())

    async def swept(self, seen: Sequence[Seen]) -> int:
        """Each swept cluster's health alert, told as its episode says (posted by the engine:
        none is counted here); a channel's burst of new alerts in one roll-up's thread."""
        records = await self.records.get_many([item.cluster.name for item in seen])
        now = self.clock()
        to_post: dict[str, list[HealthRecord]] = {}
        async for record, _ in paced(records.values()):
            channel, episode = self.channel_of(record), record.episode
            if channel is not None and episode is not None and _to_post(episode, now):
                to_post.setdefault(channel, []).append(record)
        for channel, posts in to_post.items():
            if len(posts) >= BURST:
                await self._burst(channel, posts, now)
        async for record, _ in paced(records.values()):
            await self.tell(record)
        return 0

    def _item(self, record: HealthRecord, burst: str | None = None) -> Owed:
        assert record.episode is not None
        version = drawn_as(record.episode)
        subject = {"cluster": record.cluster, "version": version}
        if burst is not None:
            subject["burst"] = burst
        return self.engine.due(KIND, f"{KIND}:{record.cluster}:{version}", subject)

    async def _burst(self, channel: str, posts: Sequence[HealthRecord], at: float) -> None:
        """The new alerts of one channel (``BURST`` or more) not owed yet, owed with their
        roll-up in one write, and the roll-up sent first."""
        new = await not_owed(self.engine, posts, lambda r: self._item(r).key, KIND)
        if len(new) < BURST:
            return
        said = bursts.rollup_reply([r.episode for r in new if r.episode is not None], at)
        await owe_burst(
            self.outbox,
            channel,
            (rollup_key(bursts.KIND, channel, at), said),
            lambda key: (self._item(record, key) for record in new),
        )

    async def tell(self, record: HealthRecord) -> None:
        """Owe the drawing of the record's episode, when it is owed, and do it now."""
        episode = record.episode
        if episode is None or not episode.owed:
            return
        item = self._item(record)
        await self.engine.owe(item)
        await self.engine.run(item.key)

    async def work(self, attempt: Attempt) -> Outcome:
        """Draw the episode where it is owed: post it, or edit its alert. One drawing of a
        cluster's alert at a time here, each of the state it reads: a drawing that read an
        older state cannot land after a newer one (the newer waits, then reads its own)."""
        cluster = str(attempt.subject["cluster"])
        async with self._drawing.setdefault(cluster, asyncio.Lock()):
            return await self._draw(attempt)

    async def _draw(self, attempt: Attempt) -> Outcome:
        subject = attempt.subject
        record, _ = await self.records.get(str(subject["cluster"]))
        episode = record.episode
        if "note" in subject:
            return await self._noted(attempt, episode)
        if episode is None or not episode.owed or drawn_as(episode) != subject["version"]:
            return Done("drawn, or moved on since")
        cluster_id, target = record.cluster.rsplit("/", 1)[-1], target_of(record.cluster)
        channel = self.channel_of(record)
        now = self.clock()
        message = episode.alert_message
        card = health_card(episode, cluster_id, target, now)
        thread = None
        if message is None and isinstance(subject.get("burst"), str):
            thread = await rollup_thread(self.engine, str(subject["burst"]))
            if thread == WAIT:
                return Later(now + 2.0, "its burst's roll-up is not posted yet")
        try:
            if channel is None:
                pass  # nowhere to post: the episode is kept, and shown by /cluster health
            elif message is not None:
                await self.messenger.update(channel, message, card)
            elif episode.open and not (episode.snoozed_until and episode.snoozed_until > now):
                posting = (record.cluster, episode, channel, thread)
                message = await self._post(attempt, posting, card)
        except MessengerError as error:
            outcome = refused(error, now, f"cannot post a health alert in {channel}")
            if isinstance(outcome, GiveUp):  # kept, and shown by /cluster health
                await self._drawn(record.cluster, episode, None, None)
            return outcome
        await self._drawn(record.cluster, episode, channel if message else None, message)
        return Done()

    async def _post(
        self,
        attempt: Attempt,
        posting: tuple[str, Episode, str, MessageId | None],
        card: Reply,
    ) -> MessageId:
        """Post the episode's alert once, whichever drawing of it does: the post is marked
        on the episode before it is sent, and a drawing that finds the mark without a
        message looks for the post (by the episode's key) before sending another. ``posting``:
        the cluster, its episode, the channel, and the roll-up's thread (None: the channel)."""
        cluster, episode, channel, thread = posting
        key = f"{KIND}:{cluster}:{episode.opened_at:.3f}"
        if episode.posting:
            sent = 0.0 if episode.posting is True else float(episode.posting)
            if self.clock() - sent < attempt.engine.post_window:
                # another drawing's post may still be on its way: look once it cannot be
                raise MessengerError("post_in_flight", passing=True)
            try:
                found = await self.messenger.find(channel, key, episode.opened_at, thread)
            except MessengerError as error:
                if error.passing:  # the look may work later: never post again without it
                    raise
                log.warning("%s: cannot tell whether it arrived (%s); posting it", key, error.code)
                found = None
            if found is not None:
                return found
        else:
            at = self.clock()
            marked = await self.update(cluster, lambda r: _marked(r, episode, at))
            if marked.episode is None or marked.episode.posting != at:
                # another drawing (another process's) marked it first: its post may be on
                # its way; this one looks for it later rather than post beside it
                raise MessengerError("post_in_flight", passing=True)
        await attempt.sending(attempt.engine.post_window)
        message = await self.messenger.post(channel, card, key=key, thread=thread)
        attempt.step("health-alert-posted")
        await attempt.sent()
        return message

    async def _edit(self, channel: str, message: MessageId, card: Reply) -> None:
        """An edit of an alert, owed: it arrives whatever the chat platform says meanwhile."""
        await self.outbox.send(self.outbox.item(channel, card, edit=message))

    async def _drawn(
        self, cluster: str, drawn: Episode, channel: str | None, message: MessageId | None
    ) -> None:
        """Clear ``owed`` on the same episode, unless a later sweep has moved it on."""

        def drawn_now(record: HealthRecord) -> HealthRecord:
            now = record.episode
            if now is None or now.opened_at != drawn.opened_at:
                return record
            # the post is the episode's whatever came since; owed is cleared only for the
            # state that was drawn
            return replace(
                record,
                episode=replace(
                    now,
                    owed=now.owed and drawn_as(now) != drawn_as(drawn),
                    posting=now.posting if message is None else False,
                    alert_message=message or now.alert_message,
                    alert_channel=channel or now.alert_channel,
                ),
            )

        await self.update(cluster, drawn_now)

    async def gone(self, cluster: str) -> None:
        """The cluster was deleted: its open episode's alert says so (owed first), and its
        record goes."""
        record, _ = await self.records.get(cluster)
        episode = record.episode
        if episode and episode.open and episode.alert_message and episode.alert_channel:
            card = gone_card(cluster.rsplit("/", 1)[-1])
            await self._edit(episode.alert_channel, episode.alert_message, card)
        await self.records.delete(cluster)

    async def note(self, cluster: str, note: Line) -> None:
        """Draw the alert again with a note (a fix asked from it, and how it went): owed as
        a drawing of the state it was noted on, which is skipped once the alert has moved on
        (a sweep drew it healed meanwhile: the note must not draw it back)."""
        record, _ = await self.records.get(cluster)
        episode = record.episode
        if episode is None or episode.alert_message is None or episode.alert_channel is None:
            return
        cluster_id, target = cluster.rsplit("/", 1)[-1], target_of(cluster)
        card = encode(health_card(episode, cluster_id, target, self.clock(), note))
        version = drawn_as(episode)
        said = hashlib.sha256(json.dumps(card, sort_keys=True).encode()).hexdigest()[:12]
        key = f"{KIND}:{cluster}:{version}:note:{said}"
        subject = {"cluster": cluster, "version": version, "note": card}
        await self.engine.owe(self.engine.due(KIND, key, subject))
        await self.engine.run(key)

    async def _noted(self, attempt: Attempt, episode: Episode | None) -> Outcome:
        """A note's drawing: on the alert as it was when noted, or not at all."""
        subject = attempt.subject
        if episode is None or drawn_as(episode) != subject["version"]:
            return Done("the alert moved on since the note")
        if episode.alert_message is None or episode.alert_channel is None:
            return Done("no alert to note")
        try:
            await self.messenger.update(
                episode.alert_channel, episode.alert_message, decode(subject["note"])
            )
        except MessengerError as error:
            return refused(error, self.clock(), "cannot edit the health alert")
        return Done()

    async def request_ended(self, request: ApprovalRequest) -> None:
        """A Resume or Drain asked from an alert ended: say how on the alert (the next sweep
        says whether the node is back)."""
        if request.origin != Origin.HEALTH or request.kind not in (RESUME, DRAIN):
            return
        node = request.plan.detail.node
        verb = "Resume" if request.kind == RESUME else "Drain"
        said: Line = (Strong(f"{verb} {node}"), " (request ", Code(request.id), ") ")
        if request.state == RequestState.SUCCEEDED:
            said += (f"done: {request.outcome}. The next sweep looks at it again.",)
        else:
            who = request.decided_by or request.requester
            said += (Strong(str(request.state)), " by ", UserRef(who))
            said += (f": {request.outcome}." if request.outcome else ".",)
        await self.note(request.cluster, said)
