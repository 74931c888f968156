"""Off-hours schedules as people ask for them: proposed on a card, in force once approved,
listed, paused, resumed and ended (each audited), and a night skipped or postponed from its
notice. The nights themselves are ``handlers/schedules/nights.py``'s.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from handlers.changes.approvals import Approvals, new_request_id
from handlers.changes.ledger import RequestLedger
from handlers.changes.plan import ChangePlan, PlanError, fingerprint
from handlers.costs import money
from handlers.domain.models import Cluster
from handlers.entities import ApprovalRequest, Origin, RequestState
from handlers.grammar import CommandError
from handlers.replies import Note, Reply, Table, notice
from handlers.schedules.kind import ScheduleDetail
from handlers.schedules.model import Phase, Schedule, ScheduleState, actor_of, schedule_of
from handlers.schedules.nights import POSTPONE, Nights
from handlers.schedules.times import Weekly, local

if TYPE_CHECKING:
    from handlers.sweep.observe import Seen


class LabelLook(Protocol):
    async def observed(self, seen: Sequence[Seen]) -> None: ...


log = logging.getLogger(__name__)
UPCOMING = 5  # off/on pairs the card shows
WEEK = 7 * 24 * 3600.0
STANDING = (ScheduleState.ACTIVE, ScheduleState.PAUSED)
NOT_APPROVED = {
    RequestState.REJECTED: "rejected",
    RequestState.EXPIRED: "not approved in time",
    RequestState.WITHDRAWN: "withdrawn",
    RequestState.ABANDONED: "its card could not be posted",
    RequestState.REFUSED: "refused",
    RequestState.FAILED: "not recorded",
    RequestState.UNKNOWN: "not recorded",
}


class Schedules:
    def __init__(self, *, nights: Nights, approvals: Approvals, ledger: RequestLedger) -> None:
        self.nights = nights
        self.thread = nights.thread
        self.store = nights.store
        self.approvals = approvals
        self.ledger = ledger
        self.clock = nights.clock
        # schedules by cluster label, when the policy has any: handed each sweep's clusters
        self.labels: LabelLook | None = None

    # -- asking --------------------------------------------------------------------------------

    async def propose(
        self,
        actor: str,
        channel: str,
        cluster_key: str,
        pool: str | None,
        off: Weekly,
        on: Weekly,
        zone: str,
        label: str | None = None,
    ) -> ApprovalRequest | None:
        """Store the schedule as proposed, then post its card: approved, it is in force. One
        a cluster's label asks for has an id of its own: of two replicas, one asks (None)."""
        cluster = await self.approvals.directory.resolve(cluster_key, "schedule")
        try:
            pools = _pools(cluster, pool)
        except PlanError as error:
            raise CommandError(str(error), "schedule") from None
        now = self.clock()
        made = hashlib.sha256(f"{cluster.name}|{label}".encode()).hexdigest()[:8]
        schedule = Schedule(
            id=f"sch-{made if label else secrets.token_hex(4)}",
            cluster=cluster.name or "",
            pool=pool,
            off=off,
            on=on,
            zone=zone,
            requested_by=actor,
            channel=channel,
            created_at=now,
            request_id=new_request_id(),
            label=label,
        )
        replaces = next(
            (s.id for s in await self.store.schedules(STANDING) if _same_scope(s, schedule)), None
        )
        plan = self._plan(cluster, schedule, pools, replaces)
        if not await self.store.add_schedule(schedule):  # before the card: its approval finds it
            return None
        try:
            request = await self.approvals.submit(
                actor, channel, plan, Origin.COMMAND, request_id=schedule.request_id
            )
        except CommandError:
            if label:  # asked again at a later look, once the cluster's open request is decided
                await self.store.drop_schedule(schedule.id)
            else:
                await self.store.set_schedule_state(
                    schedule.id, [ScheduleState.PROPOSED], ScheduleState.ENDED
                )
            raise
        await self.store.update_schedule(schedule.id, thread=request.card_message)
        return request

    def _plan(
        self, cluster: Cluster, schedule: Schedule, pools: list[str], replaces: str | None
    ) -> ChangePlan[ScheduleDetail]:
        now, prices = self.clock(), self.approvals.prices
        pairs = self.upcoming(schedule, now, UPCOMING)
        freed = prices.freed_hour(cluster, (p for p in cluster.node_pools if p.id in pools))
        cost = prices.cluster_hour(cluster)
        detail = ScheduleDetail(
            schedule=schedule.id,
            pool=schedule.pool,
            off=str(schedule.off),
            on=str(schedule.on),
            zone=schedule.zone,
            upcoming=tuple(pairs),
            pools=tuple(pools),
            freed_hour=freed,
            hours_week=round(self.asleep_in_week(schedule, now) / 3600, 2),
            replaces=replaces,
        )
        reserved = [p.id for p in cluster.node_pools if p.id in pools and p.reserved]
        warnings = tuple(
            f"pool {pool_id!r} is reserved capacity: the reservation is billed whether its "
            "nodes run or not, so its nights at zero save nothing"
            for pool_id in reserved
        )
        return ChangePlan(
            cluster=schedule.cluster,
            detail=detail,
            cost_before=cost,
            cost_after=cost,  # approving it changes nothing now; each night saves
            fingerprint=fingerprint(cluster),
            warnings=warnings,
        )

    def upcoming(self, schedule: Schedule, after: float, count: int) -> list[tuple[float, float]]:
        """The next ``count`` nights: each "off" and the "on" after it."""
        pairs, moment = [], after
        for _ in range(count):
            off = self.nights.next_off(schedule, moment)
            on = self.nights.next_on(schedule, off)
            pairs.append((off, on))
            moment = on
        return pairs

    def asleep_in_week(self, schedule: Schedule, start: float) -> float:
        """Seconds at zero in the week from ``start``, were every night to go off."""
        asleep, moment, end = 0.0, start, start + WEEK
        while moment < end:
            off = self.nights.next_off(schedule, moment)
            if off >= end:
                break
            on = self.nights.next_on(schedule, off)
            asleep += min(on, end) - off
            moment = on
        return asleep

    # -- in force ------------------------------------------------------------------------------

    async def check_all(self) -> None:
        """Settle the proposals whose cards were decided, then fire the nights due (the
        labels are looked at by each sweep)."""
        for schedule in await self.store.schedules([ScheduleState.PROPOSED]):
            if schedule.state == ScheduleState.PROPOSED:
                try:
                    await self._settle(schedule)
                except Exception:
                    log.exception("settling schedule %s failed; retrying later", schedule.id)
        await self.nights.check_all()

    async def night_ended(self, request: ApprovalRequest) -> None:
        """A night's change ended: its schedule moves on now (asleep, awake), not at the
        next check, which a fleet's night keeps busy for minutes; its roll-up is redrawn."""
        if request.origin != Origin.SCHEDULE:
            return
        await self.nights.asking.rollup.ended(request)
        named = schedule_of(request.requester)
        schedule = None if named is None else await self.store.get_schedule(named)
        if schedule is not None and schedule.firing_request == request.id:
            await self.nights.check(schedule)

    async def _settle(self, schedule: Schedule) -> None:
        request = await self.approvals.store.get_request(schedule.request_id)
        if request is None or request.state in (RequestState.DRAFT, RequestState.PENDING):
            if request is None and self.clock() - schedule.created_at > 600:
                await self.store.set_schedule_state(
                    schedule.id, [ScheduleState.PROPOSED], ScheduleState.ENDED
                )
            return  # its card is out, or being posted
        if request.state != RequestState.SUCCEEDED:
            if request.state in NOT_APPROVED:
                await self.store.set_schedule_state(
                    schedule.id, [ScheduleState.PROPOSED], ScheduleState.ENDED
                )
            return
        now = self.clock()
        following = self.nights.next_off(schedule, now)
        schedule.thread = schedule.thread or request.card_message  # a card posted late
        said = self.thread.line(schedule, f"in force; first off {local(following, schedule.zone)}")
        if not await self.store.set_schedule_state(
            schedule.id,
            [ScheduleState.PROPOSED],
            ScheduleState.ACTIVE,
            owe=[said],
            approved_by=request.decided_by,
            next_off=following,
            thread=schedule.thread,
        ):
            return  # another replica settled it
        detail = request.plan.detail
        replaced = getattr(detail, "replaces", None)
        if replaced:
            await self.stop(replaced, ScheduleState.ENDED, actor=actor_of(schedule.id))
        await self.ledger.record(
            request.decided_by or "policy",
            "schedule_started",
            schedule.cluster,
            request.id,
            schedule=schedule.id,
            off=str(schedule.off),
            on=str(schedule.on),
            zone=schedule.zone,
        )
        schedule.state = ScheduleState.ACTIVE
        await self.thread.outbox.sent_now(said)

    # -- people's actions ----------------------------------------------------------------------

    async def change(self, actor: str, schedule_id: str, action: str) -> Reply:
        """``pause``, ``resume`` or ``end`` a schedule (operators); audited."""
        schedule = await self._find(schedule_id)
        if action == "resume":
            now = self.clock()
            if not await self.store.set_schedule_state(
                schedule.id,
                [ScheduleState.PAUSED],
                ScheduleState.ACTIVE,
                next_off=self.nights.next_off(schedule, now),
            ):
                raise CommandError(f"{schedule.id} is {schedule.state}, not paused", "schedule")
            await self._audit(actor, schedule, "schedule_resumed")
            return notice("Schedule resumed", f"{schedule.id} of {schedule.scope} runs again.")
        state = ScheduleState.PAUSED if action == "pause" else ScheduleState.ENDED
        if not await self.stop(schedule.id, state, actor=actor):
            raise CommandError(f"{schedule.id} is {schedule.state} already", "schedule")
        woken = ""
        if schedule.phase == Phase.ASLEEP:
            woken = " It wakes now: it was asleep."
        elif schedule.phase in (Phase.GOING_OFF, Phase.WAKING):
            woken = " It wakes as soon as the change under way has finished."
        words = "paused: no off fires until it is resumed" if action == "pause" else "ended"
        return notice(
            "Schedule paused" if action == "pause" else "Schedule ended",
            f"{schedule.id} of {schedule.scope} is {words}.{woken}",
        )

    async def stop(self, schedule_id: str, state: ScheduleState, *, actor: str) -> bool:
        schedule = await self.store.get_schedule(schedule_id)
        if schedule is None:
            return False
        before = [ScheduleState.ACTIVE] if state == ScheduleState.PAUSED else list(STANDING)
        # asleep, it is woken at the next check: a schedule that stops never leaves it at zero
        wake = self.clock() if schedule.phase == Phase.ASLEEP else schedule.next_on
        words = "paused" if state == ScheduleState.PAUSED else "ended"
        if schedule.phase == Phase.ASLEEP:
            words += "; it wakes now"
        elif schedule.phase == Phase.GOING_OFF:  # the off under way ends, and it wakes then
            words += "; it wakes as soon as tonight's scale-down has finished"
        said = self.thread.line(schedule, words, by=actor)
        if not await self.store.set_schedule_state(
            schedule.id, before, state, owe=[said], next_on=wake
        ):
            return False
        await self._audit(actor, schedule, f"schedule_{words.split(';')[0]}")
        await self.thread.outbox.sent_now(said)
        return True

    async def night(self, actor: str, schedule_id: str, off_at: int, postpone: bool) -> Reply:
        """Skip tonight's "off", or postpone it two hours, from its notice."""
        schedule = await self._find(schedule_id)
        due = schedule.next_off
        if schedule.phase != Phase.AWAKE or due is None or int(due) != off_at:
            return notice("Schedule", "That night has passed or was changed already.")
        moved = due + POSTPONE if postpone else self.nights.next_off(schedule, due)
        what = "postponed to" if postpone else "skipped tonight; next off"
        said = self.thread.line(schedule, f"{what} {local(moved, schedule.zone)}", by=actor)
        if not await self.store.move_schedule(
            schedule.id, Phase.AWAKE, Phase.AWAKE, owe=[said], next_off=moved
        ):
            return notice("Schedule", "That night has passed or was changed already.")
        await self._audit(actor, schedule, "schedule_postponed" if postpone else "schedule_skipped")
        await self.thread.outbox.sent_now(said)
        return notice("Schedule", f"{schedule.scope}: {what} {local(moved, schedule.zone)}.")

    async def _find(self, schedule_id: str) -> Schedule:
        schedule = await self.store.get_schedule(schedule_id)
        if schedule is None or schedule.state == ScheduleState.PROPOSED:
            raise CommandError(
                f"there is no schedule {schedule_id!r} in force; /cluster schedules lists them",
                "schedule",
            )
        return schedule

    async def _audit(self, actor: str, schedule: Schedule, action: str) -> None:
        await self.ledger.record(actor, action, schedule.cluster, None, schedule=schedule.id)

    # -- reading -------------------------------------------------------------------------------

    async def listing(self) -> Reply:
        shown = [s for s in await self.store.schedules(STANDING) if s.state in STANDING]
        reply = Reply("off-hours schedules")
        if not shown:
            return reply.add(
                Note(
                    "No schedule is in force. /cluster schedule CLUSTER off DAYS HH:MM on DAYS "
                    "HH:MM [tz ZONE] asks for one."
                )
            )
        rows = [_row(s) for s in shown]
        titles = ("ID", "SCALES", "OFF", "ON", "ZONE", "NOW", "NEXT", "SAVED")
        return reply.add(
            Table.of(titles, rows, right=frozenset({7})),
            Note(
                "Saved is at list prices: hours at zero times what the pools cost when they "
                "went off. /cluster schedule pause|resume|end ID changes one."
            ),
        )


def _row(schedule: Schedule) -> tuple[str, ...]:
    paused = schedule.state == ScheduleState.PAUSED
    if schedule.sleeping:
        upcoming = f"on {local(schedule.next_on or 0.0, schedule.zone)}"
    elif paused:
        upcoming = "paused"
    else:
        upcoming = f"off {local(schedule.next_off or 0.0, schedule.zone)}"
    now = "paused" if paused and not schedule.sleeping else str(schedule.phase)
    return (
        schedule.id,
        schedule.scope,
        str(schedule.off),
        str(schedule.on),
        schedule.zone,
        now,
        upcoming,
        money(schedule.saved, per_hour=False),
    )


def _same_scope(a: Schedule, b: Schedule) -> bool:
    return a.cluster == b.cluster and a.pool == b.pool


def _pools(cluster: Cluster, pool: str | None) -> list[str]:
    """The pools a schedule scales: the one named, or every compute pool."""
    if pool is None:
        pools = [p.id for p in cluster.compute_pools()]
        if not pools:
            raise PlanError(f"{cluster.cluster_id} has no compute pool to schedule")
        return pools
    if cluster.pool(pool) is None:
        names = ", ".join(sorted(p.id for p in cluster.node_pools))
        raise PlanError(f"{cluster.cluster_id} has no node pool {pool!r}; its pools are {names}")
    if pool == cluster.login_pool_id:
        raise PlanError(f"{pool!r} is the login pool; it cannot be scaled to zero")
    return [pool]
