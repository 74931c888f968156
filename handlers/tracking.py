"""Follows long-running operations to the end, in the approval card's thread.

Each operation is polled with backoff (1 s, x1.5, at most 20 s, like Google's clients). One
progress message per operation is edited as the progress changes, at most once per 5 s. The
final message is posted once: the right to post it is an atomic claim in the store. State
lives in the store, so after a restart every operation still in flight is picked up again;
several replicas share the work through leases.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bot.store import Store
from bot.vertex.client import VertexClient
from bot.vertex.errors import NotFoundError, VertexError, error_from_status
from bot.vertex.models import Operation
from handlers.cards import duration
from handlers.messenger import Messenger
from handlers.records import ApprovalRequest, TrackedOperation
from handlers.replies import Note, Reply, Text, escape

log = logging.getLogger(__name__)

FIRST_POLL = 1.0
BACKOFF = 1.5
MAX_INTERVAL = 20.0
EDIT_EVERY = 5.0
LEASE = 60.0

Finish = Callable[[str, bool, str], Awaitable[None]]


def next_interval(interval: float) -> float:
    return min(MAX_INTERVAL, interval * BACKOFF)


def progress_reply(operation: TrackedOperation, text: str, now: float) -> Reply:
    cluster = operation.cluster.rsplit("/", 1)[-1]
    return Reply(f"{cluster}: {text}", public=True).add(
        Text(f"*{escape(cluster)}*: {escape(text)}"),
        Note(
            f"operation `{escape(operation.name)}` · "
            f"running for {duration(now - operation.started_at)}"
        ),
    )


class Tracker:
    def __init__(
        self,
        store: Store,
        vertex: VertexClient,
        messenger: Messenger,
        clock: Callable[[], float],
        owner: str,
    ) -> None:
        self.store = store
        self.vertex = vertex
        self.messenger = messenger
        self.clock = clock
        self.owner = owner
        self.lease = LEASE
        self.on_finish: Finish | None = None

    async def track(self, request: ApprovalRequest, operation: Operation) -> None:
        now = self.clock()
        await self.store.add_operation(
            TrackedOperation(
                name=operation.name,
                request_id=request.id,
                cluster=request.cluster,
                channel=request.channel,
                thread_ts=request.card_ts,
                started_at=now,
                next_poll_at=now if operation.done else now + FIRST_POLL,
                progress=operation.progress_message,
            )
        )

    async def poll_due(self) -> int:
        """Poll every operation that is due; returns how many were polled."""
        due = await self.store.claim_due(self.owner, self.clock(), self.lease)
        await asyncio.gather(*(self._poll_safely(op) for op in due))
        return len(due)

    async def _poll_safely(self, operation: TrackedOperation) -> None:
        try:
            await self.poll(operation)
        except Exception:  # one operation's trouble must not stop the others
            log.exception("polling %s failed; retrying later", operation.name)
            await self.store.update_operation(
                operation.name, next_poll_at=self.clock() + MAX_INTERVAL, owner=None
            )

    async def poll(self, operation: TrackedOperation) -> None:
        if operation.final is not None:  # the outcome is known; only the message is owed
            await self._finish(operation)
            return
        try:
            current = await self.vertex.get_operation(operation.name)
        except NotFoundError:
            operation.done, operation.error = (
                True,
                "the control plane no longer knows this operation",
            )
            await self._finish(operation)
            return
        except VertexError as error:
            log.warning("operation %s: %s", operation.name, error.user_message)
            interval = next_interval(operation.interval)
            await self.store.update_operation(
                operation.name, interval=interval, next_poll_at=self.clock() + interval
            )
            return
        if current.done:
            operation.done = True
            if current.error is not None:
                failure = error_from_status(current.error.code, current.error.message)
                operation.error = failure.user_message
            await self._finish(operation)
            return
        await self._progress(operation, current.progress_message or "running")

    async def _progress(self, operation: TrackedOperation, text: str) -> None:
        now = self.clock()
        interval = next_interval(operation.interval)
        next_poll = now + interval
        changes: dict[str, object] = {"progress": text, "interval": interval, "owner": None}
        if text != operation.shown_progress:
            wait = operation.last_edit_at + EDIT_EVERY - now
            if wait <= 0:
                await self._show(operation, progress_reply(operation, text, now))
                changes.update(
                    shown_progress=text, progress_ts=operation.progress_ts, last_edit_at=now
                )
            else:
                next_poll = min(next_poll, now + wait)  # show it as soon as edits are allowed
        changes["next_poll_at"] = next_poll
        await self.store.update_operation(operation.name, **changes)

    async def _show(self, operation: TrackedOperation, reply: Reply) -> None:
        if operation.progress_ts is None:
            operation.progress_ts = await self.messenger.post(
                operation.channel, reply, thread_ts=operation.thread_ts
            )
        else:
            await self.messenger.update(operation.channel, operation.progress_ts, reply)

    async def _finish(self, operation: TrackedOperation) -> None:
        if operation.final is None:
            if not await self.store.claim_final(operation.name):
                return  # another poller owns the final message
            await self.store.update_operation(
                operation.name, done=True, error=operation.error, final="claimed"
            )
            operation.final = "claimed"
        took = duration(self.clock() - operation.started_at)
        cluster = escape(operation.cluster.rsplit("/", 1)[-1])
        if operation.error:
            text = f"failed after {took}: {operation.error}"
            reply = Reply(f"{cluster}: operation failed", public=True).add(
                Text(
                    f"*{cluster}*: the operation *failed* after {took}.\n"
                    f"> {escape(operation.error)}"
                )
            )
        else:
            text = f"finished in {took}"
            reply = Reply(f"{cluster}: done", public=True).add(
                Text(f"*{cluster}*: done in {took}.")
            )
        if self.on_finish is not None:  # idempotent: a repeat after a crash changes nothing
            await self.on_finish(operation.request_id, operation.error is None, text)
        if operation.progress_ts is not None:
            await self.messenger.update(
                operation.channel,
                operation.progress_ts,
                progress_reply(operation, "failed" if operation.error else "done", self.clock()),
            )
        await self.messenger.post(operation.channel, reply, thread_ts=operation.thread_ts)
        await self.store.update_operation(operation.name, final="posted", owner=None)
