"""A schedule's nights: each "off" and "on" fired once, as an ordinary resize asked by the
schedule and approved by whoever approved it, never under running work.

Each check moves a schedule at most one phase on (``handlers/schedules/model.py``), each move
one conditional change in the store: of several replicas one fires, and a crash between any
two steps leaves a phase that the next check finishes by looking at the request it chose the
id of before asking, and at the cluster. A schedule whose wake was missed while every replica
was down is woken by the first check after a start, and one paused or ended, whatever phase
its night is in, is woken by the first check after it went to sleep.

A night's change is asked and approved in one step, as the schedule's approver, and sent
before anything is said in chat (``Cards.submit_approved``): a wake needs no Slack. What the
thread is told is owed with the move that makes it so (``Outbox``), so it is said once. An
approver who no longer holds the role approves nothing: the "off" is asked again on a card
for a current approver, and a wake (which only gives back what the schedule took) is
approved by the policy. A cluster deleted meanwhile ends its schedules, said once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from handlers.changes.approvals import Approvals, new_request_id
from handlers.changes.plan import ChangePlan
from handlers.changes.resize import plan_pools
from handlers.domain.errors import NotFoundError, SlurmUnreadableError, VertexError
from handlers.entities import ApprovalRequest, RequestState
from handlers.grammar import CommandError
from handlers.ports import ActivityReader, Clock, CrashPoint, no_crash
from handlers.reading.clusters import ClusterDirectory, error_text
from handlers.schedules.asking import NightAsking
from handlers.schedules.model import Bounds, Phase, Schedule, ScheduleState
from handlers.schedules.ports import Calendar, ScheduleStore
from handlers.schedules.thread import ScheduleThread, notice_of
from handlers.schedules.times import local
from handlers.sweep.observe import slurm_demand
from handlers.words import duration

log = logging.getLogger(__name__)
NOTICE_LEAD = 15 * 60.0  # the notice with Skip tonight and Postpone comes this long before
RETRY = 5 * 60.0  # a busy queue at "off", or a wake that failed, is looked at again after
LOOKS = 12  # looks at a busy queue before the night is skipped (an hour)
POSTPONE = 2 * 3600.0
IN_FLIGHT = (RequestState.APPROVED, RequestState.EXECUTING, RequestState.RUNNING)
AT_ONCE = 128  # schedules checked at a time: a fleet's nights at one minute go together


class Nights:
    def __init__(
        self,
        *,
        store: ScheduleStore,
        calendar: Calendar,
        directory: ClusterDirectory,
        activity: ActivityReader,
        approvals: Approvals,
        asking: NightAsking,
        thread: ScheduleThread,
        clock: Clock,
        crash: CrashPoint = no_crash,
        at_once: int = AT_ONCE,
    ) -> None:
        self.at_once = max(1, at_once)
        self.store = store
        self.calendar = calendar
        self.directory = directory
        self.activity = activity
        self.approvals = approvals
        self.asking = asking
        self.thread = thread
        self.clock = clock
        self.crash = crash

    def next_off(self, schedule: Schedule, after: float) -> float:
        return self.calendar.next_time(schedule.off, schedule.zone, after)

    def next_on(self, schedule: Schedule, after: float) -> float:
        return self.calendar.next_time(schedule.on, schedule.zone, after)

    async def check_all(self) -> None:
        """Check every active schedule, ``at_once`` at a time: a fleet on one schedule goes
        off together, each change then waiting only for its place in the control plane's
        write quota (``handlers/pacing.py``), never for another schedule's."""
        waiting = iter(await self.store.schedules([ScheduleState.ACTIVE]))

        async def checker() -> None:
            for schedule in waiting:  # shared: each schedule is taken by one checker
                try:
                    await self.check(schedule)
                except Exception:  # one schedule's trouble must not stop the others
                    log.exception(
                        "checking schedule %s failed; retrying at the next check", schedule.id
                    )

        await asyncio.gather(*(checker() for _ in range(self.at_once)))

    async def check(self, schedule: Schedule) -> None:
        now, active = self.clock(), schedule.state == ScheduleState.ACTIVE
        if schedule.phase == Phase.AWAKE and active:
            await self._awake(schedule, now)
        elif schedule.phase == Phase.WAITING:
            await self._waiting(schedule, now, active)
        elif schedule.phase == Phase.ASLEEP:
            # paused or ended, whatever phase the night was in when it stopped: woken now
            if now >= (schedule.next_on or 0.0) or not active:
                await self._wake(schedule, now)
        elif schedule.phase in (Phase.GOING_OFF, Phase.WAKING):
            await self._follow(schedule, now)

    # -- off ---------------------------------------------------------------------------------

    async def _awake(self, schedule: Schedule, now: float) -> None:
        off = schedule.next_off
        if off is None:
            await self.store.update_schedule(schedule.id, next_off=self.next_off(schedule, now))
        elif now >= off:
            if await self.store.move_schedule(
                schedule.id, Phase.AWAKE, Phase.WAITING, due_at=now, tries=0
            ):
                schedule.phase, schedule.due_at, schedule.tries = Phase.WAITING, now, 0
                await self._waiting(schedule, now, True)
        elif now >= off - NOTICE_LEAD and schedule.noticed_for != off:
            notice = self.thread.line(schedule, *notice_of(schedule, off))
            if await self.store.claim_notice(schedule.id, off, owe=[notice]):
                await self.thread.outbox.sent_now(notice)

    async def _waiting(self, schedule: Schedule, now: float, active: bool) -> None:
        due = schedule.due_at or now
        if not active:  # paused while waiting: this night does not happen
            await self.store.move_schedule(
                schedule.id, Phase.WAITING, Phase.AWAKE, next_off=self.next_off(schedule, now)
            )
            return
        if now < due:
            return
        busy = await self._busy(schedule, now)
        if busy is None:
            await self._go_off(schedule, due)
            return
        tries = schedule.tries + 1
        if tries >= LOOKS:
            over = duration(now - (schedule.next_off or now))
            why = f"skipped tonight: {busy} at each of {tries} looks over {over}"
            await self._skip(schedule, Phase.WAITING, why, if_due=due)
        else:
            why = f"not scaled down: {busy}"
            await self._later(schedule, Phase.WAITING, why, tries, if_due=due)

    async def _busy(self, schedule: Schedule, now: float) -> str | None:
        """Why the pools cannot go off now (work that would be cut off), or None."""
        try:
            horizon = max(0.0, (schedule.next_on or now) - now)
            demand, census = await slurm_demand(self.activity, schedule.cluster, now, horizon)
        except SlurmUnreadableError as error:
            return f"Slurm could not be read ({error.reason}), so running work cannot be ruled out"
        if demand.active:
            return f"Slurm has {demand.running} running and {demand.pending} pending jobs"
        if census is not None and census.busy:
            return "Slurm shows nodes still allocated or completing"
        return None

    async def _go_off(self, schedule: Schedule, due: float) -> None:
        try:
            cluster = await self.directory.vertex.get_cluster(schedule.cluster)
        except NotFoundError:
            await self._gone(schedule)
            return
        except VertexError as error:
            await self._retry_off(schedule, due, error_text(error, f"read {schedule.cluster_id}"))
            return
        pools = [schedule.pool] if schedule.pool else [p.id for p in cluster.compute_pools()]
        kept: Bounds = {}
        for pool in filter(None, (cluster.pool(p) for p in pools)):
            if (pool.min_nodes, pool.max_nodes) != (0, 0):
                kept[pool.id] = (pool.min_nodes, pool.max_nodes)
        if not kept:
            await self._retry_off(schedule, due, "its pools are at zero nodes already", skip=True)
            return
        plan = plan_pools(cluster, {pool: (0, 0) for pool in kept}, self.approvals.prices)
        freed = (plan.cost_before or 0.0) - (plan.cost_after or 0.0)
        request_id = new_request_id()  # chosen, and kept, before the request exists
        if not await self.store.move_schedule(
            schedule.id,
            Phase.WAITING,
            Phase.GOING_OFF,
            if_due=due,
            firing_request=request_id,
            kept=kept,
            freed_hour=freed,
        ):
            return  # another replica fired it
        schedule.phase, schedule.firing_request, schedule.kept = Phase.GOING_OFF, request_id, kept
        self.crash("schedule-off-chosen")
        await self._ask(schedule, plan)

    async def _retry_off(
        self, schedule: Schedule, due: float, why: str, *, skip: bool = False
    ) -> None:
        if skip or schedule.tries + 1 >= LOOKS:
            await self._skip(schedule, Phase.WAITING, f"not scaled down tonight: {why}", if_due=due)
        else:
            why = f"not scaled down yet: {why}"
            await self._later(schedule, Phase.WAITING, why, schedule.tries + 1, if_due=due)

    async def _skip(
        self, schedule: Schedule, before: Phase, why: str, *, if_due: float | None = None
    ) -> None:
        """This night does not happen: awake again at its bounds, and the next off named."""
        following = self.next_off(schedule, self.clock())
        await self.thread.move(
            schedule,
            before,
            Phase.AWAKE,
            f"{why}; next off {local(following, schedule.zone)}",
            if_due=if_due,
            next_off=following,
            tries=0,
            firing_request=None,
            kept={},
        )

    async def _later(
        self,
        schedule: Schedule,
        before: Phase,
        why: str,
        tries: int,
        *,
        if_due: float | None = None,
    ) -> None:
        """Not yet: the off is looked at again in ``RETRY``."""
        again = self.clock() + RETRY
        looks = f" (look {tries} of {LOOKS})"
        await self.thread.move(
            schedule,
            before,
            Phase.WAITING,
            f"{why}; looking again at {local(again, schedule.zone)}{looks}",
            if_due=if_due,
            due_at=again,
            tries=tries,
            firing_request=None,
        )

    # -- on ----------------------------------------------------------------------------------

    async def _wake(self, schedule: Schedule, now: float) -> None:
        try:
            cluster = await self.directory.vertex.get_cluster(schedule.cluster)
        except NotFoundError:
            await self._gone(schedule)
            return
        except VertexError as error:
            await self._retry_on(schedule, error_text(error, f"read {schedule.cluster_id}"))
            return
        sizes: Bounds = {}
        for pool_id, bounds in schedule.kept.items():
            pool = cluster.pool(pool_id)
            if pool is not None and (pool.min_nodes, pool.max_nodes) == (0, 0):
                sizes[pool_id] = bounds  # one resized meanwhile is left as someone set it
        if not sizes:
            await self._woken(
                schedule, now, "its pools were resized while it slept; left as they are"
            )
            return
        plan = plan_pools(cluster, sizes, self.approvals.prices)
        request_id = new_request_id()
        if not await self.store.move_schedule(
            schedule.id, Phase.ASLEEP, Phase.WAKING, firing_request=request_id
        ):
            return
        schedule.phase, schedule.firing_request = Phase.WAKING, request_id
        self.crash("schedule-on-chosen")
        await self._ask(schedule, plan)

    async def _retry_on(self, schedule: Schedule, why: str) -> None:
        again = self.clock() + RETRY
        await self.thread.move(
            schedule,
            schedule.phase,
            Phase.ASLEEP,
            f"not woken yet: {why}; trying again at {local(again, schedule.zone)}",
            next_on=again,
            firing_request=None,
        )

    async def _woken(self, schedule: Schedule, now: float, said: str) -> None:
        slept = max(0.0, now - (schedule.slept_at or now))
        saved = schedule.saved + (schedule.freed_hour or 0.0) * slept / 3600
        following = self.next_off(schedule, now)
        await self.thread.move(
            schedule,
            schedule.phase,
            Phase.AWAKE,
            f"{said}; next off {local(following, schedule.zone)}",
            next_off=following,
            firing_request=None,
            kept={},
            saved=saved,
            saved_hours=schedule.saved_hours + slept / 3600,
        )

    async def _gone(self, schedule: Schedule) -> None:
        """The cluster no longer exists: the schedule ends, its night with it, said once."""
        await self.thread.move(
            schedule,
            schedule.phase,
            Phase.AWAKE,
            f"ended: {schedule.cluster_id} no longer exists",
            state=ScheduleState.ENDED,
            firing_request=None,
            kept={},
        )

    # -- both --------------------------------------------------------------------------------

    async def _ask(self, schedule: Schedule, plan: ChangePlan[Any]) -> None:
        """Ask the night's change under the id the schedule kept (``NightAsking``)."""
        try:
            asked: ApprovalRequest | None = await self.asking.ask(schedule, plan)
        except CommandError as error:
            # made by another replica finishing the same night, or not made at all
            asked = await self.approvals.store.get_request(schedule.firing_request or "")
            if asked is None:
                await self._not_asked(schedule, error.reason)
                return
        self.crash("schedule-asked")
        assert asked is not None
        await self.asking.approve(schedule, asked)

    async def _not_asked(self, schedule: Schedule, why: str) -> None:
        if schedule.phase == Phase.GOING_OFF:
            why = f"not scaled down yet: {why}"
            await self._later(schedule, Phase.GOING_OFF, why, schedule.tries + 1)
        else:
            await self._retry_on(schedule, why)

    async def _follow(self, schedule: Schedule, now: float) -> None:
        """A night's change asked, or about to be: finish what the request says."""
        request = await self.approvals.store.get_request(schedule.firing_request or "")
        if request is None:  # cut off before it was asked: look at the cluster again
            await self._reask(schedule)
        elif request.state == RequestState.PENDING:
            await self.asking.approve(schedule, request)
        elif request.state in IN_FLIGHT or request.state == RequestState.DRAFT:
            return  # the executor, the tracker and recovery carry it
        elif request.state == RequestState.SUCCEEDED:
            await self._done(schedule, request, now)
        elif request.state == RequestState.ABANDONED:
            await self._again(schedule, now)
        elif schedule.phase == Phase.GOING_OFF:
            ended = f"request {request.id} ended {request.state}"
            why = f"not scaled down: {ended} ({request.outcome or 'no reason given'})"
            await self._skip(schedule, Phase.GOING_OFF, why)
        else:
            await self._retry_on(schedule, f"request {request.id} ended {request.state}")

    async def _again(self, schedule: Schedule, now: float) -> None:
        """The night's card never made it (a stop cut it off before it was confirmed): the
        night is asked again, under a new id, from a fresh look at Slurm and the cluster."""
        if schedule.phase == Phase.GOING_OFF:
            await self.store.move_schedule(
                schedule.id, Phase.GOING_OFF, Phase.WAITING, due_at=now, firing_request=None
            )
        else:
            await self.store.move_schedule(
                schedule.id, Phase.WAKING, Phase.ASLEEP, next_on=now, firing_request=None
            )

    async def _reask(self, schedule: Schedule) -> None:
        try:
            cluster = await self.directory.vertex.get_cluster(schedule.cluster)
        except VertexError:
            return  # looked at again at the next check
        if schedule.phase == Phase.GOING_OFF:
            sizes = {pool: (0, 0) for pool in schedule.kept}
        else:
            sizes = dict(schedule.kept)
        present = {p: b for p, b in sizes.items() if cluster.pool(p) is not None}
        await self._ask(schedule, plan_pools(cluster, present, self.approvals.prices))

    async def _done(self, schedule: Schedule, request: ApprovalRequest, now: float) -> None:
        if schedule.phase == Phase.WAKING:
            back = ", ".join(f"{p} {lo}:{hi}" for p, (lo, hi) in schedule.kept.items())
            await self._woken(schedule, request.finished_at or now, f"back on: {back}")
            return
        slept_at = request.finished_at or now
        on = self.next_on(schedule, max(slept_at, schedule.next_off or slept_at))
        pools = ", ".join(schedule.kept)
        await self.thread.move(
            schedule,
            Phase.GOING_OFF,
            Phase.ASLEEP,
            f"asleep: {pools} at zero nodes; back on at {local(on, schedule.zone)}",
            slept_at=slept_at,
            next_on=on,
        )
