"""The one engine that does what the bot owes: every capability records its items here and
declares a worker for their kind; none writes its own claim, lease or retry.

- An item is recorded before any of it is done (``owe``, or with the state change that makes
  it owed, in one transaction: ``due``), and owing it again is harmless: its key is taken.
- A replica takes a due item with a lease (``run_due``, or ``run`` at once where it was
  recorded) and renews that lease only while the item's worker is running here (``renew``,
  from the heartbeat). A replica that cannot reach the database stops renewing, and cancels
  the workers whose leases may lapse; any replica then takes the item over, without a restart.
- Before a call whose effect cannot be taken back, the worker records until when it may still
  be applied (``Attempt.sending``). Nobody takes the item again before that moment, so a call
  still in flight is never sent a second time, and the attempt after it is told it is
  ``unsure``: it looks at the world before it sends anything.
- An attempt that fails is tried again later, with backoff; one that says ``Later`` is due
  again when it says. Each step a worker names passes the crash hook, and a step must be
  declared by its worker: the crash tests find every step from the workers themselves.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, Unpack

from handlers.owed.model import (
    LONGEST_RETRY,
    Done,
    GiveUp,
    Later,
    Outcome,
    Owed,
    OwedChanges,
    OwedState,
    Room,
    retry_in,
)
from handlers.owed.store import OwedStore
from handlers.ports import Clock, CrashPoint, no_crash

log = logging.getLogger(__name__)
LEASE = 15.0  # seconds an item's lease lasts unless the replica running it renews it
AT_ONCE = 16  # items one replica runs at a time
PATIENCE = 2.0  # seconds ``run_due`` waits for what it started before it returns
ATTEMPT_LIMIT = 600.0  # seconds one attempt may run before it is cancelled and tried again
POST_WINDOW = 35.0  # seconds a chat post may still arrive once sent: the Web API call's timeout
# set in an attempt of a room that leaves what it owes to the next tick (``Room.leaves``)
_LEAVING: ContextVar[bool] = ContextVar("owed_leaving", default=False)


class Worker(Protocol):
    """Does the items of one kind. ``steps`` names every step ``work`` passes
    (``Attempt.step``), each unique across workers: the crash points."""

    @property
    def kind(self) -> str: ...

    @property
    def steps(self) -> tuple[str, ...]: ...

    async def work(self, attempt: Attempt) -> Outcome: ...


class LeaseLost(Exception):
    """The item is no longer this replica's: another took it over. Nothing more is done."""


class Attempt:
    """One worker's hold on one item, for the length of one attempt."""

    def __init__(self, engine: Engine, worker: Worker, item: Owed) -> None:
        self.engine = engine
        self.worker = worker
        self.item = item
        # a call of an earlier attempt may have been applied: look before sending again
        self.unsure = item.in_flight_until > 0

    @property
    def key(self) -> str:
        return self.item.key

    @property
    def subject(self) -> dict[str, Any]:
        return self.item.subject

    def step(self, name: str) -> None:
        """A named step passed (a crash point); it must be one of the worker's ``steps``."""
        if name not in self.worker.steps:
            raise ValueError(f"{self.worker.kind} declares no step {name!r}")
        self.engine.crash(name)

    async def sending(self, seconds: float) -> None:
        """Record, before a call that changes the world, that it may be applied for the next
        ``seconds`` (its whole deadline, retries included); raises ``LeaseLost`` when the
        item is no longer this replica's, and nothing may be sent."""
        until = self.engine.clock() + seconds
        await self._record(in_flight_until=until)
        self.item.in_flight_until = until

    async def sent(self, **result: Any) -> None:
        """The call was answered (or shown not applied): nothing is in flight any more; and
        what it gave (``result``, a posted message's id) is kept in the same write."""
        if self.item.in_flight_until or result:
            merged = {**self.item.result, **result}
            await self._record(in_flight_until=0.0, result=merged)
            self.item.in_flight_until, self.item.result = 0.0, merged
        self.unsure = False

    async def keep(self, **result: Any) -> None:
        """Keep what this attempt learned (a message's id) for any later attempt."""
        merged = {**self.item.result, **result}
        await self._record(result=merged)
        self.item.result = merged

    async def _record(self, **changes: Unpack[OwedChanges]) -> None:
        if not await self.engine.store.mark_owed(self.item.key, self.engine.owner, **changes):
            raise LeaseLost(self.item.key)


@dataclass
class _Running:
    kind: str
    task: asyncio.Task[None]
    held_until: float  # the lease, as last renewed here
    lost: bool = False


class Engine:
    def __init__(
        self,
        *,
        store: OwedStore,
        clock: Clock,
        owner: str,
        crash: CrashPoint = no_crash,
        lease: float = LEASE,
        at_once: int = AT_ONCE,
        patience: float = PATIENCE,
        rng: random.Random | None = None,
        post_window: float = POST_WINDOW,
        attempt_limit: float = ATTEMPT_LIMIT,
    ) -> None:
        self.store = store
        self.clock = clock
        self.owner = owner
        self.crash = crash
        self.lease = lease
        self.at_once = at_once
        self.patience = patience
        self.rng = rng or random.Random()
        self.post_window = post_window  # how long a chat post may still arrive once sent
        self.attempt_limit = attempt_limit
        self.workers: dict[str, Worker] = {}
        self.rooms: dict[str, Room] = {}  # kinds with a room of their own
        self.running: dict[str, _Running] = {}
        # batches claimed here whose items are not all started yet: an item claimed in the
        # database by one of them is not in ``running`` until it is
        self._claiming = 0
        self._started = asyncio.Event()
        self._started.set()
        self.stopping = False
        self.done = 0  # items ended here (a count for the metrics)

    # -- declaring ---------------------------------------------------------------------------

    def add(self, *workers: Worker, room: Room | None = None) -> None:
        """Register workers; a kind or a step claimed twice is refused. With ``room``, the
        workers' items run in a room of their own; the others share ``at_once``."""
        for worker in workers:
            if worker.kind in self.workers:
                raise ValueError(f"two workers for {worker.kind!r}")
            taken = set(self.steps()) & set(worker.steps)
            if taken or len(set(worker.steps)) != len(worker.steps):
                raise ValueError(f"{worker.kind} names a step twice: {sorted(taken)}")
            self.workers[worker.kind] = worker
            if room is not None:
                self.rooms[worker.kind] = room

    def steps(self) -> dict[str, str]:
        """Every named step, with the kind whose worker passes it."""
        return {step: kind for kind, w in self.workers.items() for step in w.steps}

    # -- owing -------------------------------------------------------------------------------

    def due(self, kind: str, key: str, subject: dict[str, Any], at: float | None = None) -> Owed:
        """An item to record, with the state change that makes it owed or with ``owe``."""
        if kind not in self.workers:
            raise ValueError(f"no worker does {kind!r}")
        now = self.clock()
        return Owed(
            key=key, kind=kind, subject=subject, due_at=now if at is None else at, created_at=now
        )

    async def owe(self, *items: Owed) -> set[str]:
        """Record items; returns the keys that were not owed before."""
        return await self.store.owe(list(items))

    # -- doing -------------------------------------------------------------------------------

    async def run(self, key: str) -> bool:
        """Take one item now, if it is free and due, and do it here (the click that approved
        a change sends it at once); whether it was taken. One this replica is doing already
        is waited for (not taken again), so its caller sees how it ended. From an attempt in a
        room that ``leaves`` what it owes, nothing is taken: the item is due, for the next
        tick."""
        if _LEAVING.get():
            return False
        running = self.running.get(key)
        if running is not None:
            await asyncio.shield(running.task)
            return False
        if self.stopping:
            return False
        item = await self.store.claim_owed_item(key, self.owner, self.clock(), self.lease)
        if item is None:
            if self._claiming:  # a batch claimed here may hold it, not started yet
                await self._started.wait()
            running = self.running.get(key)
            if running is not None:
                await asyncio.shield(running.task)
            return False
        await self._start(item)
        running = self.running.get(key)
        if running is not None:
            await asyncio.shield(running.task)
        return True

    async def run_due(self, kinds: Iterable[str] | None = None) -> int:
        """Take the items that are due and free, as many as there is room for, and start
        them; waits ``patience`` for them, and those still running go on by themselves."""
        if self.stopping:
            return 0
        wanted = list(self.workers if kinds is None else kinds)
        shared = [k for k in wanted if k not in self.rooms]
        batches = [(shared, self.at_once, 0.0)] + [
            ([k], self.rooms[k].at_once, self.rooms[k].spread) for k in wanted if k in self.rooms
        ]
        tasks: list[asyncio.Task[None]] = []
        taken, longest = 0, 0.0
        for batch, at_once, spread in batches:
            room = at_once - self._running_of(batch)
            if not batch or room <= 0:
                continue
            self._claiming += 1
            self._started.clear()
            try:
                items = await self.store.claim_owed(
                    self.owner, self.clock(), self.lease, room, batch
                )
                for index, item in enumerate(items):
                    task = await self._start(item, delay=index * spread / len(items))
                    if task is not None:
                        tasks.append(task)
            finally:
                self._claiming -= 1
                if not self._claiming:
                    self._started.set()
            taken += len(items)
            longest = max(longest, spread if items else 0.0)
        if tasks:
            done, _ = await asyncio.wait(tasks, timeout=longest + self.patience)
            for task in done:  # the process ending (not a failure of the item's): passed on
                ended = None if task.cancelled() else task.exception()
                if ended is not None and not isinstance(ended, Exception):
                    raise ended
        return taken

    def _running_of(self, kinds: Sequence[str]) -> int:
        return sum(r.kind in kinds for r in self.running.values())

    async def _start(self, item: Owed, delay: float = 0.0) -> asyncio.Task[None] | None:
        worker = self.workers.get(item.kind)
        if worker is None:  # a kind this release does not know: leave it to one that does
            await self.store.settle_owed(
                item.key,
                self.owner,
                due_at=self.clock() + LONGEST_RETRY,
                note=f"no worker here does {item.kind}",
            )
            return None
        task = asyncio.get_running_loop().create_task(self._attempt(worker, item, delay))
        self.running[item.key] = _Running(item.kind, task, item.lease_until)
        task.add_done_callback(lambda _: self.running.pop(item.key, None))
        return task

    async def _attempt(self, worker: Worker, item: Owed, delay: float = 0.0) -> None:
        attempt = Attempt(self, worker, item)
        room = self.rooms.get(item.kind)
        _LEAVING.set(room is not None and room.leaves)  # this task's own context
        try:
            if delay:  # its place in a batch that is spread out (``Room``)
                await asyncio.sleep(delay)
            async with asyncio.timeout(self.attempt_limit):  # in this task; wait_for adds one
                outcome = await worker.work(attempt)
        except LeaseLost:
            log.warning("%s: another replica holds it now; this attempt stops", item.key)
            return
        except asyncio.CancelledError:
            running = self.running.get(item.key)
            if running is not None and running.lost:
                log.warning("%s: its lease may have lapsed; this attempt stops", item.key)
                return
            raise
        except Exception as error:  # one item's trouble must not stop the others
            await self._failed(item, error)
            return
        await self._settle(item, outcome)

    async def _failed(self, item: Owed, error: BaseException) -> None:
        attempts = max(1, item.attempts)
        again = self.clock() + retry_in(attempts, self.rng)
        note = f"{type(error).__name__}: {error}"[:500]
        log.warning(
            "%s failed (attempt %d): %s; trying again later",
            item.key,
            attempts,
            note,
            exc_info=error,
        )
        try:
            await self.store.settle_owed(item.key, self.owner, due_at=again, note=note)
        except Exception:  # the database itself: the lease lapses and anyone takes it up
            log.warning("%s: could not record the failure; its lease will lapse", item.key)

    async def _settle(self, item: Owed, outcome: Outcome) -> None:
        now = self.clock()
        if isinstance(outcome, Later):
            await self.store.settle_owed(
                item.key, self.owner, due_at=outcome.at, note=outcome.why or None
            )
            return
        state = OwedState.DONE if isinstance(outcome, Done) else OwedState.DROPPED
        note = outcome.note if isinstance(outcome, Done) else outcome.why
        if isinstance(outcome, GiveUp):
            log.warning("%s given up: %s", item.key, outcome.why)
        await self.store.settle_owed(
            item.key, self.owner, state=state, done_at=now, note=note or None
        )
        self.done += 1

    # -- leases ------------------------------------------------------------------------------

    async def renew(self) -> None:
        """Renew the leases of the items running here, and only those. When the database
        cannot be reached, the attempts whose lease may lapse before the next renewal are
        cancelled: another replica may take them over once it lapses."""
        if not self.running:
            return
        now = self.clock()
        keys = list(self.running)
        until = now + self.lease
        try:
            held = await self.store.renew_owed(self.owner, keys, until)
        except Exception as error:
            log.warning("could not renew %d leases: %s", len(keys), error)
            for key in keys:
                running = self.running.get(key)
                if running is not None and now >= running.held_until - self.lease / 3:
                    self._lose(key)
            return
        for key in keys:
            running = self.running.get(key)
            if running is None:
                continue
            if key in held:
                running.held_until = until
            elif not running.task.done():
                self._lose(key)

    def _lose(self, key: str) -> None:
        running = self.running.get(key)
        if running is not None and not running.lost:
            running.lost = True
            running.task.cancel()

    async def stop(self, limit: float) -> int:
        """Take nothing more; let the attempts running here finish for ``limit`` seconds,
        cancel the rest and hand their items back at once. Returns how many were handed
        back."""
        self.stopping = True
        tasks = [r.task for r in self.running.values()]
        if tasks:
            await asyncio.wait(tasks, timeout=limit)
        left = list(self.running)
        for key in left:
            self._lose(key)
        if left:
            await asyncio.wait([r.task for r in self.running.values()], timeout=1.0)
            try:
                await self.store.release_owed(self.owner, left)
            except Exception:
                log.warning("could not hand back %d items; their leases will lapse", len(left))
        return len(left)

    async def owed_now(self, kinds: Sequence[str] | None = None) -> list[Owed]:
        """The items still due, oldest first (for the metrics and the tests)."""
        return await self.store.owed_items(kinds=kinds)
