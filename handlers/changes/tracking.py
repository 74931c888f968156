"""Follows changes to the end, in the approval card's thread.

What is followed is a long-running operation (polled by name), or, when no operation is known
(its reply was lost, or a replica took the change over after a crash), the cluster itself,
watched until it settles. Following is owed work (``handlers/owed``): its item is recorded
with the move to ``running``, in one transaction, and each poll is one attempt of the
``follow`` worker, due again at the next step of its backoff (1 s, x1.5, at most 20 s, like
Google's clients). The engine leases each poll to one replica and gives a poll cut off by a
stop or a lost database to any other; the follow worker's polls have a room of their own, so
that a thousand operations are followed at their pace beside everything else the bot owes.
A poll never waits for Slack: its progress is shown only when there is room for it, and what
an end owes in chat (the card, the end in the thread, a schedule's line) is left to the next
tick (``Room.leaves``), so that a thousand ends at once never hold the polls' places.

The thread message under the card is posted once (by its key, like every owed post) and
edited as the progress changes, at most once per 5 s; the end is told once, by the request's
move to its end (``RequestLedger.end``), whatever crashes between the steps.
"""

from __future__ import annotations

import logging
import random
from typing import Unpack, cast

from handlers.changes.approval_card import thread_reply
from handlers.changes.kinds import kind_of
from handlers.changes.ledger import RequestLedger
from handlers.domain.errors import NotFoundError, VertexError, error_from_status
from handlers.domain.pools import ClusterState
from handlers.entities import (
    Final,
    OperationChanges,
    OperationKind,
    RequestState,
    TrackedOperation,
)
from handlers.messenger import Messenger, MessengerError
from handlers.owed.engine import Attempt
from handlers.owed.model import Done, Later, Outcome
from handlers.owed.posting import look_for, post_once
from handlers.ports import Clock, ControlPlane, OperationStore, RequestStore
from handlers.reading.shortage import shortage_advice
from handlers.replies import Code, Line
from handlers.words import duration

log = logging.getLogger(__name__)

FOLLOW = "follow"  # the worker's kind
BACKOFF = 1.5
MAX_INTERVAL = 20.0
EDIT_EVERY = 5.0
# Polls a replica runs at a time (the follow worker's room, ``Room``). With the 20 s longest
# step this follows 1,000 operations at their pace, and it spreads a crowd that falls due
# together (a takeover, a fleet-wide change) over the ticks that follow instead of polling
# it in one burst: at most 3,000 operations.get calls a minute against the control plane's
# per-minute read quota.
POLLS_AT_ONCE = 50
PROGRESS = "progress"  # the name of the thread message's post among the item's posts
KEPT_AT_MOST = 20_000  # operations whose row a replica keeps between polls (a few MB)


def follow_key(request_id: str) -> str:
    """The owed item that follows a request's change to its end."""
    return f"{FOLLOW}:{request_id}"


def next_interval(interval: float) -> float:
    return min(MAX_INTERVAL, interval * BACKOFF)


_spread = random.Random()


def spread(interval: float) -> float:
    """The wait before the next poll: the backoff step, shortened by up to a fifth at random,
    so that operations started together do not stay in step and poll in bursts."""
    return interval * _spread.uniform(0.8, 1.0)


def cluster_id(name: str) -> str:
    return name.rsplit("/", 1)[-1]


class Tracker:
    """The ``follow`` worker: one poll of one change per attempt."""

    kind = FOLLOW
    steps = ("follow-posted", "follow-outcome-kept", "follow-ended")

    def __init__(
        self,
        *,
        store: OperationStore,
        requests: RequestStore,
        vertex: ControlPlane,
        messenger: Messenger,
        ledger: RequestLedger,
        clock: Clock,
    ) -> None:
        self.store = store
        self.requests = requests
        self.vertex = vertex
        self.messenger = messenger
        self.ledger = ledger
        self.clock = clock
        self.ended = 0  # ends told by this replica (a count to notice change by)
        # each operation as the last poll here left it, with the attempt that left it: the
        # next poll reads it from here instead of the database (``_recall``)
        self._kept: dict[str, tuple[tuple[float, int], TrackedOperation]] = {}

    async def work(self, attempt: Attempt) -> Outcome:
        name = str(attempt.subject["operation"])
        item = attempt.item
        operation = self._recall(name, (item.created_at, item.attempts - 1))
        if operation is None:
            operation = await self.store.get_operation(name)
        outcome = await self._work(attempt, operation)
        if operation is not None and isinstance(outcome, Later):
            self._remember(name, (item.created_at, item.attempts), operation)
        return outcome

    def _recall(self, name: str, before: tuple[float, int]) -> TrackedOperation | None:
        """The operation as this replica's last poll of it left its row, if no attempt came
        between: each claim of the item counts one more attempt, so an item (told by when
        it was owed) whose count is one past the one kept was polled by no one else (here,
        on another replica, by another release) since. Only polls write the row."""
        kept = self._kept.pop(name, None)
        if kept is None or kept[0] != before:
            return None
        return kept[1]

    def _remember(self, name: str, at: tuple[float, int], operation: TrackedOperation) -> None:
        """Kept for the next poll when it ended as planned (``Later``), every write of it
        applied to the row; a poll cut off leaves nothing, and the next one reads the row."""
        if len(self._kept) >= KEPT_AT_MOST:
            self._kept.pop(next(iter(self._kept)))
        self._kept[name] = (at, operation)

    async def _work(self, attempt: Attempt, operation: TrackedOperation | None) -> Outcome:
        if operation is None or operation.final == Final.POSTED:
            return Done("its end is told")
        if operation.progress_message is None:
            # a first progress post cut off before its record: found (and kept) before
            # anything else is said in the thread, so that neither it nor the end is doubled
            found = attempt.item.result.get(PROGRESS)
            if found is None and attempt.unsure:
                found = await look_for(
                    attempt, self.messenger, operation.channel, operation.thread, PROGRESS
                )
            if isinstance(found, str):
                await self._keep_progress(operation, found)
        if operation.final is not None or operation.done:
            return await self._finish(attempt, operation)  # the outcome is known: told now
        if operation.kind == OperationKind.CLUSTER:
            return await self._poll_cluster(attempt, operation)
        return await self._poll_operation(attempt, operation)

    async def _poll_operation(self, attempt: Attempt, operation: TrackedOperation) -> Outcome:
        try:
            current = await self.vertex.get_operation(operation.name)
        except NotFoundError:
            return await self._done(
                attempt, operation, "the control plane no longer knows this operation"
            )
        except VertexError as error:
            log.warning("operation %s: %s", operation.name, error.user_message)
            return await self._backoff(operation)
        if not current.done:
            return await self._progress(attempt, operation, current.progress_message or "running")
        failure = None
        if current.error is not None:
            refused = error_from_status(
                current.error.code, current.error.message, current.error.details
            )
            advice = shortage_advice(refused)
            failure = refused.user_message + (f" ({advice})" if advice else "")
        created, updated = current.create_time, current.update_time
        ended = self.clock()
        if created is not None and updated is not None:
            # The duration by the control plane's own clock, however late it is noticed.
            ended = operation.started_at + max(0.0, (updated - created).total_seconds())
        return await self._done(attempt, operation, failure, ended)

    async def _poll_cluster(self, attempt: Attempt, operation: TrackedOperation) -> Outcome:
        """Follow the cluster: done when it settles, judged against the plan."""
        request = await self.requests.get_request(operation.request_id)
        if request is None:
            return await self._done(attempt, operation, "its request is gone")
        plan = request.plan
        kind = kind_of(plan)
        deleting = kind.effect.removes
        try:
            cluster = await self.vertex.get_cluster(operation.cluster)
        except NotFoundError:
            gone = None if deleting else "the cluster no longer exists"
            return await self._done(attempt, operation, gone)
        except VertexError as error:
            log.warning("watching %s: %s", operation.cluster, error.user_message)
            return await self._backoff(operation)
        settled_at = self.clock()
        if deleting:
            if cluster.state == ClusterState.STOPPING:
                return await self._progress(
                    attempt, operation, "deleting (the cluster is STOPPING)"
                )
            return await self._done(
                attempt,
                operation,
                f"the cluster is {cluster.state} again; the delete did not happen",
            )
        if cluster.state in (ClusterState.UPDATING, ClusterState.PROVISIONING):
            return await self._progress(attempt, operation, f"the cluster is {cluster.state}")
        if cluster.state == ClusterState.RUNNING and kind.applied(plan, cluster):
            return await self._done(attempt, operation, None, settled_at)
        asked = kind.wanted(plan)
        return await self._done(
            attempt,
            operation,
            f"the cluster settled {cluster.state} without the change (wanted {asked})",
            settled_at,
        )

    async def _backoff(self, operation: TrackedOperation) -> Outcome:
        interval = next_interval(operation.interval)
        return await self._again(operation, self.clock() + spread(interval), interval=interval)

    async def _again(
        self, operation: TrackedOperation, at: float, **changes: Unpack[OperationChanges]
    ) -> Outcome:
        """Polled again at ``at``: the follow item's due time, which the engine keeps. The
        operation's row is written only with what this poll learned that it does not hold
        yet, so a poll that finds it as it was (the longest step reached, the same words)
        costs no write."""
        learned = {k: v for k, v in changes.items() if getattr(operation, k) != v}
        if learned:
            await self.store.update_operation(operation.name, **cast(OperationChanges, learned))
            for key, value in learned.items():  # what the row holds now, for the next poll
                setattr(operation, key, value)
        return Later(at)

    async def _progress(self, attempt: Attempt, operation: TrackedOperation, text: str) -> Outcome:
        now = self.clock()
        interval = next_interval(operation.interval)
        next_poll = now + spread(interval)
        changes = OperationChanges(progress=text, interval=interval)
        if text != operation.shown_progress:
            wait = operation.last_edit_at + EDIT_EVERY - now
            if wait <= 0:
                if await self._show(attempt, operation, text, now):
                    changes["shown_progress"] = text
                    changes["last_edit_at"] = now
            else:
                next_poll = min(next_poll, now + wait)  # show it as soon as edits are allowed
        return await self._again(operation, next_poll, **changes)

    async def _show(
        self, attempt: Attempt, operation: TrackedOperation, text: str, now: float
    ) -> bool:
        """The progress, in the thread message (posted the first time); whether it shows."""
        what = "operation" if operation.kind == OperationKind.OPERATION else "watching the cluster"
        took = duration(now - operation.started_at)
        note: Line = (
            (f"{what} ", Code(operation.name), f" · running for {took}")
            if operation.kind == OperationKind.OPERATION
            else (f"{what} · for {took}",)
        )
        reply = thread_reply(cluster_id(operation.cluster), text, note)
        if operation.thread is None:  # a card posted after its change was sent
            request = await self.requests.get_request(operation.request_id)
            if request is not None and request.lines_thread:
                operation.thread = request.lines_thread
                await self.store.update_operation(operation.name, thread=operation.thread)
        try:
            if operation.progress_message is None:
                message = await post_once(
                    attempt,
                    self.messenger,
                    operation.channel,
                    reply,
                    thread=operation.thread,
                    name=PROGRESS,
                    progress=True,
                )
                await self._keep_progress(operation, message)
            else:
                await self.messenger.update(
                    operation.channel, operation.progress_message, reply, progress=True
                )
        except MessengerError as error:
            # under Slack's rate limit (a fleet's night in one channel) it shows at a later
            # poll, or the end is told without it: not worth a warning per poll
            level = logging.DEBUG if error.code == "ratelimited" else logging.WARNING
            log.log(level, "progress of %s not shown: %s", operation.name, error.code)
            return False
        return True

    async def _keep_progress(self, operation: TrackedOperation, message: str) -> None:
        """The thread message is kept with the operation at once: a restart edits it, not
        posts another; the request keeps it too, for the end told in it."""
        operation.progress_message = message
        await self.requests.update_request(operation.request_id, progress_message=message)
        await self.store.update_operation(operation.name, progress_message=message)

    async def _done(
        self,
        attempt: Attempt,
        operation: TrackedOperation,
        error: str | None,
        ended: float | None = None,
    ) -> Outcome:
        operation.done, operation.error = True, error
        operation.done_at = operation.done_at or ended or self.clock()
        return await self._finish(attempt, operation)

    async def _finish(self, attempt: Attempt, operation: TrackedOperation) -> Outcome:
        """The outcome is kept first (a later poll tells it, never polls again), then told
        by the request's move to its end, once."""
        if operation.final is None:
            await self.store.update_operation(
                operation.name,
                final=Final.CLAIMED,
                done=True,
                error=operation.error,
                done_at=operation.done_at,
            )
            operation.final = Final.CLAIMED
            attempt.step("follow-outcome-kept")
        took = duration((operation.done_at or self.clock()) - operation.started_at)
        outcome = (
            f"failed after {took}: {operation.error}" if operation.error else f"finished in {took}"
        )
        request = await self.requests.get_request(operation.request_id)
        if request is not None:
            state = RequestState.FAILED if operation.error else RequestState.SUCCEEDED
            await self.ledger.end(
                request, [RequestState.RUNNING], state, actor="control-plane", outcome=outcome
            )
        attempt.step("follow-ended")
        await self.store.update_operation(operation.name, final=Final.POSTED)
        self.ended += 1
        return Done(outcome)
