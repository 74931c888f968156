"""The core's services (approvals, execution and tracking, idle sweeps and alerts) built by
``handlers.services.build`` on in-memory ports with a manual clock, read through the
plain-text adapter: each test runs in milliseconds, with no HTTP, database or Slack."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from bot.calendar import CronCalendar
from bot.charts import AggCharts
from handlers import dispatch
from handlers.capabilities import REGISTRY
from handlers.capability import Options, Port, Ports
from handlers.changes.approvals import DRAFT_TIMEOUT
from handlers.changes.capability import RELEASE_STATE
from handlers.changes.tracking import FOLLOW, MAX_INTERVAL, POLLS_AT_ONCE, follow_key
from handlers.costs import money
from handlers.domain.names import Target
from handlers.entities import RequestState
from handlers.forms.choices import Forms
from handlers.forms.flow import FormFlow, state_of
from handlers.forms.model import Entry
from handlers.owed.engine import Room
from handlers.owed.posting import POST_WINDOW
from handlers.policy import Policy, Role
from handlers.ports import ActivityReader, CrashPoint, NodeUpdater, ReleaseStore, no_crash
from handlers.registry import Registry
from handlers.replies import Reply
from handlers.schedules.capability import CALENDAR, SCHEDULE_STORE
from handlers.schedules.ports import ScheduleStore
from handlers.services import Services, build
from handlers.spend.capability import CHARTS, DIGEST_CRON, DIGEST_FIRINGS, SPEND_LEDGER
from handlers.spend.digest import DigestStore, Firings
from handlers.spend.runs import SPEND_RECORD
from handlers.sweep.rules import Status
from handlers.sweep.sweep import SWEEP_LEASE
from tests.conftest import ManualClock
from tests.support.factories import cluster_doc
from tests.support.fakes import FakeMessenger
from tests.support.memory import (
    FakeActivity,
    FakeControlPlane,
    MemoryIdleRecords,
    MemoryKeeper,
    MemoryStore,
    PolicyRoles,
)
from tests.support.text_adapter import TextChat, TextPeople, form_text, text

TARGET = "demo-project/us-central1"
C1 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/c1"
ALERTS = "C0ALERTS"
INFRA = "C0INFRA"


def running(doc: dict[str, Any], nodes: int) -> dict[str, Any]:
    """The cluster as the API shows a RUNNING one: a node status per node that exists."""
    doc["clusterStatus"] = {
        "state": "RUNNING",
        "nodesStatus": [{"nodePoolId": "gpu", "nodeState": "RUNNING"}] * nodes
        + [{"nodePoolId": "login", "nodeState": "RUNNING"}],
    }
    return doc


def provided(ports: dict[Port[Any], object]) -> dict[str, object]:
    """The capabilities' ports by name, those given (not None)."""
    return {port.name: given for port, given in ports.items() if given is not None}


PATIENCE = 60.0  # seconds a tick of the unit tests' engine waits for the work it started


@dataclass
class Bot:
    services: Services
    store: MemoryStore
    records: MemoryIdleRecords
    keeper: MemoryKeeper  # every other capability's records
    plane: FakeControlPlane
    activity: Any  # a FakeActivity, unless make_bot was given another reader
    messenger: FakeMessenger
    clock: ManualClock

    async def ask(self, user: str, words: str, channel: str = INFRA) -> Reply | None:
        answer = await self.services.dispatcher.command(user, channel, words)
        return answer.reply

    async def click(self, user: str, action: str, value: str) -> Reply | None:
        return (await self.services.dispatcher.click(user, action, value, None)).reply

    def cards(self) -> list[tuple[str, Reply]]:
        return [(ts, r) for _, ts, r, thread in self.messenger.posted if thread is None]

    def edits_of(self, ts: str) -> list[Reply]:
        return [r for _, edited, r in self.messenger.edits if edited == ts]

    async def only_request(self) -> Any:
        [request] = await self.store.requests_in(list(RequestState))
        return request


POLICY = {
    "roles": {"operator": ["U0ALICE"], "approver": ["U0BOB"]},
    "idle": {"idle_after_minutes": 10},
}


@pytest.fixture
def bot(clock: ManualClock) -> Bot:
    return make_bot(clock, Policy.model_validate(POLICY))


def make_bot(
    clock: ManualClock,
    policy: Policy,
    crash: CrashPoint = no_crash,
    same_world_as: Bot | None = None,
    activity: ActivityReader | None = None,
    sweep_interval: float = 60.0,
    owner: str | None = None,
    releases: ReleaseStore | None = None,
    messenger: FakeMessenger | None = None,
    schedules: ScheduleStore | None = None,
    digests: DigestStore | None = None,
    nodes: NodeUpdater | None = None,
    database: Any = None,
    digest_firings: Firings | None = None,
    registry: Registry = REGISTRY,
    writes_per_minute: int | None = None,
) -> Bot:
    """A bot on in-memory ports; with ``same_world_as``, a new process (a restart, another
    replica) on the first one's store, control plane and Slack; ``activity`` reads Slurm in
    place of the counts of a ``FakeActivity``; ``database``: a real store (SQLite) in place
    of the in-memory one, for every port it keeps."""
    if same_world_as is None:
        store, records = database or MemoryStore(), MemoryIdleRecords()
        keeper = MemoryKeeper()
        plane, messenger = FakeControlPlane(), messenger or FakeMessenger()
        activity = activity or FakeActivity()
        plane.add(running(cluster_doc(cluster_id="c1", nodes=2), nodes=2))
    else:
        world = same_world_as
        store, records, plane = world.store, world.records, world.plane
        keeper = world.keeper
        activity, messenger = world.activity, world.messenger
    ports = Ports(
        requests=store,
        operations=store,
        leases=store,
        reports=store,
        records=records,
        keeper=keeper,
        control_plane=plane,
        activity=activity,
        messenger=messenger,
        roles=PolicyRoles(policy),
        people=TextPeople(),
        clock=clock,
        owed=store,
        nodes=nodes,
        provided=provided(
            {
                SPEND_LEDGER: store,
                RELEASE_STATE: releases,
                SCHEDULE_STORE: schedules,
                CALENDAR: CronCalendar() if schedules is not None else None,
                CHARTS: AggCharts(),
                DIGEST_FIRINGS: digests,
                DIGEST_CRON: digest_firings,
            }
        ),
    )
    options = Options(
        owner=owner or ("me" if same_world_as is None else "restarted"),
        targets=[_target()],
        alert_channel=ALERTS,
        sweep_interval=sweep_interval,
        crash=crash,
        writes_per_minute=writes_per_minute,
        # a tick waits for the work it started (a chart drawn by its child process, a store's
        # write): what a test asserts after it is done, on a loaded machine too; the tests of
        # the patience itself set their own
        patience=PATIENCE,
    )
    return Bot(
        build(ports, policy, options, registry),
        store,
        records,
        keeper,
        plane,
        activity,
        messenger,
        clock,
    )


def _target() -> Target:
    return Target.parse(TARGET)


# -- approvals ---------------------------------------------------------------------------------


async def test_a_request_gets_its_card_and_twenty_approvals_send_one_patch(bot: Bot) -> None:
    assert await bot.ask("U0ALICE", "resize c1 gpu 3") is None  # the card is the answer
    [(card_message, card)] = bot.cards()
    assert "Resize request: c1 / gpu" in text(card) and "2 -> 3" in text(card)
    request = await bot.only_request()
    assert request.state == RequestState.PENDING and request.card_message == card_message
    answers = await asyncio.gather(*(bot.click("U0BOB", "approve", request.id) for _ in range(20)))
    assert len(bot.plane.patches) == 1
    assert (await bot.only_request()).state == RequestState.RUNNING
    assert sum(a is None for a in answers) == 1  # the others are told it was decided
    assert all("already" in text(a) for a in answers if a is not None)
    scaling = bot.plane.clusters[C1].node_pools[0].scaling_spec
    assert scaling is not None and (scaling.min_node_count, scaling.max_node_count) == (3, 3)


async def test_the_operation_is_followed_to_exactly_one_end(bot: Bot) -> None:
    await bot.ask("U0ALICE", "resize c1 gpu 3")
    await bot.click("U0BOB", "approve", (await bot.only_request()).id)
    [operation] = bot.plane.operations
    bot.clock.advance(1)
    assert await poll(bot) == 1  # still running
    bot.clock.advance(12)
    bot.plane.finish(operation)
    bot.clock.advance(30)
    assert await poll(bot) == 1
    request = await bot.only_request()
    assert request.state == RequestState.SUCCEEDED
    assert "Done" in text(bot.edits_of(request.card_message)[-1])
    thread = [r for _, _, r, parent in bot.messenger.posted if parent == request.card_message]
    assert len(thread) == 2  # one thread message, edited to the end, and one mention
    assert "your request" in text(thread[1]) and "U0ALICE" in text(thread[1])
    edits = len(bot.messenger.edits)
    bot.clock.advance(60)
    assert await poll(bot) == 0 and len(bot.messenger.edits) == edits  # nothing more
    assert await bot.store.count_in_flight() == 0


async def test_a_failed_operation_says_why(bot: Bot) -> None:
    await bot.ask("U0ALICE", "resize c1 gpu 3")
    request = await bot.only_request()
    await bot.click("U0BOB", "approve", request.id)
    [operation] = bot.plane.operations
    bot.plane.finish(operation, {"code": 8, "message": "Quota exceeded for a3-ultragpu-8g"})
    bot.clock.advance(5)
    await poll(bot)
    ended = await bot.only_request()
    assert ended.state == RequestState.FAILED
    assert "Quota exceeded for a3-ultragpu-8g" in text(bot.edits_of(request.card_message)[-1])


async def test_reject_is_for_approvers_and_withdraw_for_the_requester(
    clock: ManualClock,
) -> None:
    roles = {"operator": ["U0ALICE", "U0CAROL"], "approver": ["U0BOB"]}
    policy = Policy.model_validate({**POLICY, "roles": roles})
    bot = make_bot(clock, policy)
    await bot.ask("U0ALICE", "resize c1 gpu 3")
    request = await bot.only_request()
    refused = await bot.click("U0CAROL", "reject", request.id)
    assert refused is not None and "Rejecting is for approvers" in text(refused)
    assert (await bot.only_request()).state == RequestState.PENDING
    not_hers = await bot.click("U0CAROL", "withdraw", request.id)
    assert not_hers is not None and "who asked for it, can withdraw it" in text(not_hers)
    assert await bot.click("U0ALICE", "withdraw", request.id) is None
    assert (await bot.only_request()).state == RequestState.WITHDRAWN
    assert (await bot.store.audit_log())[0].action == "withdrawn"


async def test_nobody_approves_their_own_request_and_an_unanswered_one_expires(
    bot: Bot,
) -> None:
    await bot.ask("U0BOB", "resize c1 gpu 3")  # an approver asks
    request = await bot.only_request()
    own = await bot.click("U0BOB", "approve", request.id)
    assert own is not None and "cannot approve" in text(own).lower()
    bot.clock.advance(3601)
    assert await bot.services.approvals.expire_due() == 1
    assert (await bot.only_request()).state == RequestState.EXPIRED
    assert "Expired" in text(bot.edits_of(request.card_message)[-1])
    assert bot.plane.patches == []


async def test_who_may_ask_is_decided_once_in_the_dispatcher(bot: Bot) -> None:
    refusal = await bot.ask("U0CAROL", "resize c1 gpu 3")  # a viewer
    assert refusal is not None
    assert "/cluster resize needs the operator role; you are viewer" in text(refusal)
    assert bot.store.requests == {} and bot.cards() == []
    listed = await bot.ask("U0CAROL", "list")
    assert listed is not None and "c1" in text(listed)
    typo = await bot.ask("U0CAROL", "lsit")
    assert typo is not None and "did you mean 'list'?" in text(typo)


# -- idle ----------------------------------------------------------------------------------------


async def sweep(bot: Bot) -> dict[str, Status]:
    report = await bot.services.sweeper.sweep(force=True)
    assert report is not None
    return {e.cluster_id: e.status for e in report.entries}


def alerts(bot: Bot) -> list[tuple[str, Reply]]:
    return [(ts, r) for channel, ts, r, _ in bot.messenger.posted if channel == ALERTS]


async def test_an_idle_paying_cluster_is_alerted_once(bot: Bot) -> None:
    bot.activity.queues[C1] = (0, 0)
    assert await sweep(bot) == {"c1": Status.WAITING}
    bot.clock.advance(11 * 60)
    assert await sweep(bot) == {"c1": Status.IDLE}
    [(_, alert)] = alerts(bot)
    assert "Idle cluster: c1" in text(alert) and "Scale to zero" in text(alert)
    bot.clock.advance(60)
    await sweep(bot)
    assert len(alerts(bot)) == 1  # once per idle period


async def test_a_week_long_idle_period_is_one_message_kept_current(bot: Bot) -> None:
    """Swept every 15 minutes for a week of idleness: one alert in the channel, edited at each
    sweep with what the period has cost, and a reminder a day in its thread."""
    bot.activity.queues[C1] = (0, 0)
    for _ in range(7 * 24 * 4):
        await sweep(bot)
        bot.clock.advance(15 * 60)
    [ts] = [ts for _, ts, _, thread in bot.messenger.posted if thread is None]
    reminders = [r for _, _, r, thread in bot.messenger.posted if thread == ts]
    assert len(reminders) == 6  # a day after the alert, and each day after that
    assert all("*Still idle*: c1 has run nothing since" in text(r) for r in reminders)
    assert "(6 days)" in text(reminders[-1])
    edits = [r for _, message, r in bot.messenger.edits if message == ts]
    assert len(edits) >= 7 * 24 * 4 - 2  # every sweep after the first alert
    spent = [text(r).split("Spent idle so far: ")[1].split("\n")[0] for r in edits[::96]]
    assert len(set(spent)) == len(spent)  # the figure grows
    assert "Scale to zero" in text(edits[-1])


async def test_each_sweep_keeps_the_pools_spend_and_a_change_closes_a_run(bot: Bot) -> None:
    """The ledger's rows come from what sweeps saw: a run stays open in the idle record while
    nothing changes, and is written once a pool's node count changes or the cluster goes."""
    price = bot.services.approvals.prices.prices["a3-ultragpu-8g"]
    bot.activity.queues[C1] = (1, 0)
    start = bot.clock.now
    await sweep(bot)
    bot.clock.advance(60)
    await sweep(bot)
    assert bot.store.spend == {}  # nothing changed: no row
    bot.plane.add(running(cluster_doc(cluster_id="c1", nodes=4), nodes=4))
    bot.clock.advance(60)
    await sweep(bot)
    [run] = bot.store.spend.values()
    assert (run.pool, run.nodes, run.start, run.end) == ("gpu", 2, start, start + 120)
    assert run.cost(0, 1e12) == pytest.approx(2 * price * 120 / 3600)
    assert run.target == TARGET and not run.idle
    record, _ = await bot.keeper.of(SPEND_RECORD).get(C1)
    assert {(r.pool, r.nodes) for r in record.runs} == {("gpu", 4), ("login", 1)}
    del bot.plane.clusters[C1]
    bot.clock.advance(60)
    await sweep(bot)  # gone: its last runs end where it was last seen, one interval on
    ends = sorted((r.pool, r.nodes, r.end) for r in bot.store.spend.values())
    assert ends == [("gpu", 2, start + 120), ("gpu", 4, start + 180), ("login", 1, start + 180)]


async def test_cost_sums_the_ledger_and_the_runs_still_open(bot: Bot) -> None:
    """``/cluster cost`` answers from what sweeps saw: the closed runs and the open ones, by
    cluster or by pool, with the idle part; bad words get the reason and the usage."""
    prices = bot.services.approvals.prices.prices
    price, login = prices["a3-ultragpu-8g"], prices["n2-standard-8"]
    bot.activity.queues[C1] = (0, 0)
    for _ in range(16):  # 15 minutes of sweeps a minute apart, quiet for the last 5
        await sweep(bot)
        bot.clock.advance(60)
    said = text(await bot.ask("U0CAROL", "cost"))
    spent = (2 * price + login) * 16 / 60  # each observation holds a minute: 16 minutes
    assert "Cost of all clusters, last 30d" in said and "c1" in said
    assert money(spent, per_hour=False).lstrip("~") in said, said
    idle = 2 * price * (16 - 10) / 60  # idle from the sweep 10 minutes after quiet began
    assert money(idle, per_hour=False).lstrip("~") in said, said
    pools = text(await bot.ask("U0CAROL", "cost c1 since 1h"))
    assert "c1 / gpu" in pools and "c1 / login" in pools and "last 1h" in pools
    wrong = text(await bot.ask("U0CAROL", "cost c1 by color"))
    assert "cost by 'color'" in wrong and "/cluster cost [CLUSTER]" in wrong


@pytest.mark.parametrize(
    ("jobs", "busy_nodes", "nodes", "status"),
    [
        ((1, 0), 0, 2, Status.BUSY),  # a running job
        ((0, 0), 2, 2, Status.BUSY),  # allocated nodes, jobs hidden from the bot's account
        ((0, 0), 0, 0, Status.FREE),  # scaled to zero: nothing to pay for
        (None, 0, 2, Status.UNKNOWN),  # Slurm could not be read
    ],
)
async def test_what_is_never_alerted(
    bot: Bot, jobs: tuple[int, int] | None, busy_nodes: int, nodes: int, status: Status
) -> None:
    bot.plane.add(running(cluster_doc(cluster_id="c1", nodes=nodes), nodes=nodes))
    if jobs is not None:
        bot.activity.queues[C1] = jobs
    bot.activity.busy_nodes[C1] = busy_nodes
    await sweep(bot)
    bot.clock.advance(3 * 3600)
    assert await sweep(bot) == {"c1": status}
    assert alerts(bot) == []


async def test_an_operators_remedy_waits_and_a_rejection_gives_the_buttons_back(
    bot: Bot,
) -> None:
    bot.activity.queues[C1] = (0, 0)
    await sweep(bot)
    bot.clock.advance(11 * 60)
    await sweep(bot)
    [(alert_message, _)] = alerts(bot)
    assert await bot.click("U0ALICE", "idle_scale_to_zero", C1) is None
    request = await bot.only_request()
    assert request.state == RequestState.PENDING and bot.plane.patches == []
    assert "waits for an approver" in text(bot.edits_of(alert_message)[-1])
    assert await bot.click("U0BOB", "reject", request.id) is None
    restored = bot.edits_of(alert_message)[-1]
    assert "The remedies are back" in text(restored)
    assert "idle_scale_to_zero" in text(restored)


async def test_a_snoozed_cluster_is_alerted_again_only_after_the_snooze(bot: Bot) -> None:
    bot.activity.queues[C1] = (0, 0)
    await sweep(bot)
    bot.clock.advance(11 * 60)
    await sweep(bot)
    assert await bot.click("U0ALICE", "idle_snooze", f"3600|{C1}") is None
    bot.clock.advance(30 * 60)
    assert await sweep(bot) == {"c1": Status.SNOOZED}
    assert len(alerts(bot)) == 1
    bot.clock.advance(31 * 60)
    assert await sweep(bot) == {"c1": Status.IDLE}
    assert len(alerts(bot)) == 2


async def test_a_viewer_cannot_act_on_an_alert(bot: Bot) -> None:
    refusal = await bot.click("U0CAROL", "idle_keep", C1)
    assert refusal is not None
    assert "Acting on idle alerts needs the operator role; you are viewer" in text(refusal)
    unknown = await bot.click("U0BOB", "idle_snooze", "soon|x")
    assert unknown is not None and "not one clusterbot offers" in text(unknown)


# -- answers at hand ---------------------------------------------------------------------------


class GroupRoles(PolicyRoles):
    """Roles that need Slack's user groups, whose members are not known yet."""

    def known(self, user: str) -> None:
        return None


async def test_answers_at_hand_are_given_at_once_and_others_are_left_to_the_command(
    bot: Bot,
) -> None:
    dispatcher = bot.services.dispatcher
    helped = await dispatcher.instant("U0CAROL", INFRA, "help resize")
    assert helped is not None and helped.reply is not None
    assert "/cluster resize CLUSTER" in text(helped.reply)
    wrong = await dispatcher.instant("U0CAROL", INFRA, "resize c1")
    assert wrong is not None and wrong.outcome == "bad_input"
    denied = await dispatcher.instant("U0CAROL", INFRA, "resize c1 gpu 3")  # a viewer
    assert denied is not None and denied.outcome == "denied"
    assert await dispatcher.instant("U0ALICE", INFRA, "resize c1 gpu 3") is None  # needs a card
    assert await dispatcher.instant("U0CAROL", INFRA, "list") is None  # needs the control plane
    assert not bot.cards() and not bot.plane.patches


async def test_a_plain_text_chat_drives_the_core_without_any_platform(bot: Bot) -> None:
    """Words in, text out, as a second platform's adapter would see it: with no forms, the
    words a form would complete get the usage; a card's buttons name their actions."""
    chat = TextChat(bot.services.dispatcher)
    said = await chat.say("U0ALICE", "resize c1")
    assert said == "resize needs POOL\nUsage: /cluster resize CLUSTER POOL N   (or MIN:MAX)"
    assert await chat.say("U0ALICE", "resize c1 gpu 3") == ""  # the card is the answer
    [(_, card)] = bot.cards()
    assert "[Approve](approve) [Reject](reject) [Withdraw](withdraw)" in text(card)
    request = await bot.only_request()
    assert await chat.click("U0BOB", "approve", request.id) == ""
    assert len(bot.plane.patches) == 1


async def test_help_waits_for_the_role_when_only_slack_can_tell_it(clock: ManualClock) -> None:
    bot = make_bot(clock, Policy.model_validate(POLICY))
    bot.services.dispatcher.roles = GroupRoles(Policy.model_validate(POLICY))
    assert await bot.services.dispatcher.instant("U0CAROL", INFRA, "help") is None
    answer = await bot.services.dispatcher.command("U0CAROL", INFRA, "help")
    assert answer.reply is not None and "/cluster list" in text(answer.reply)


# -- a change cut off by a crash ---------------------------------------------------------------


class Died(BaseException):
    """The process ended here: not a failure the engine records, a death (as ``os._exit``
    is in the service)."""


def dies_at(point: str) -> CrashPoint:
    def crash(step: str) -> None:
        if step == point:
            raise Died(step)

    return crash


async def test_a_slurm_change_cut_off_after_its_patch_is_found_applied_and_finished(
    clock: ManualClock,
) -> None:
    policy = Policy.model_validate(POLICY)
    first = make_bot(clock, policy, crash=dies_at("after-patch"))
    assert await first.ask("U0ALICE", "slurm c1 set PreemptMode=REQUEUE") is None  # a card
    request = await first.only_request()
    with pytest.raises(Died):
        await first.services.approvals.decide("U0BOB", Role.APPROVER, request.id, approve=True)
    assert len(first.plane.patches) == 1 and await first.store.count_in_flight() == 0
    # the PATCH went out; nothing recorded its operation. Another process takes over once
    # the dead one's lease has run out, looks at the cluster, and finds the change there.
    second = make_bot(clock, policy, same_world_as=first)
    clock.advance(60)
    assert await second.services.engine.run_due() == 1
    clock.advance(5)
    await poll(second)
    ended = await second.only_request()
    assert ended.state == RequestState.SUCCEEDED, ended.state
    assert len(second.plane.patches) == 1  # never sent twice
    config = second.plane.clusters[C1].slurm.config
    assert config is not None and config["PreemptMode"] == "REQUEUE"


async def test_a_delete_cut_off_after_keeping_its_spec_is_sent_once_and_can_be_restored(
    clock: ManualClock,
) -> None:
    policy = Policy.model_validate(POLICY)
    first = make_bot(clock, policy, crash=dies_at("before-patch"))
    spec = first.plane.clusters[C1].spec()
    assert await first.ask("U0ALICE", "delete c1") is None  # a card
    request = await first.only_request()
    with pytest.raises(Died):
        await first.services.approvals.decide("U0BOB", Role.APPROVER, request.id, approve=True)
    # the spec is kept (intent before effect); the DELETE was never sent
    assert first.plane.deletes == [] and first.store.kept[C1].spec == spec
    assert await first.store.deleted_specs() == []  # not deleted: nothing to restore yet
    second = make_bot(clock, policy, same_world_as=first)
    clock.advance(60)
    assert await second.services.engine.run_due() == 1
    assert second.plane.deletes == [C1]  # looked at, still there, sent once
    [operation] = second.plane.operations
    second.plane.finish(operation)
    clock.advance(5)
    await poll(second)
    assert (await second.only_request()).state == RequestState.SUCCEEDED
    [kept] = await second.store.deleted_specs()
    assert kept.cluster == C1 and kept.spec == spec and kept.request_id == request.id

    # restored: the create is cut off after it was sent; the look-up finds the cluster
    third = make_bot(clock, policy, crash=dies_at("after-patch"), same_world_as=second)
    card = await third.services.approvals.request_restore("U0ALICE", INFRA, "c1")
    with pytest.raises(Died):
        await third.services.approvals.decide("U0BOB", Role.APPROVER, card.id, approve=True)
    assert third.plane.creates == [C1]
    fourth = make_bot(clock, policy, same_world_as=third)
    clock.advance(60)
    assert await fourth.services.engine.run_due() == 1  # found PROVISIONING
    clock.advance(5)
    await poll(fourth)
    following = await fourth.store.get_request(card.id)
    assert following is not None and following.state == RequestState.RUNNING
    fourth.plane.finish(list(fourth.plane.operations)[-1])  # the create completes
    clock.advance(30)
    await poll(fourth)
    restored = await fourth.store.get_request(card.id)
    assert restored is not None and restored.state == RequestState.SUCCEEDED, restored
    assert fourth.plane.creates == [C1]  # never sent twice


@pytest.mark.parametrize("refused", [False, True])
async def test_a_progress_post_cut_off_before_its_record_is_found_not_posted_again(
    clock: ManualClock, refused: bool
) -> None:
    """A stop between the thread's first progress post and its record: the replica that
    takes the operation over finds the post by its key and shows the end in it (no second
    progress line, no separate end). Where the platform cannot be asked, it posts anew."""
    policy = Policy.model_validate(POLICY)
    first = make_bot(clock, policy, crash=dies_at("follow-posted"))
    await first.ask("U0ALICE", "resize c1 gpu 3")
    request = await first.only_request()
    await first.services.approvals.decide("U0BOB", Role.APPROVER, request.id, approve=True)
    clock.advance(1)
    with pytest.raises(Died):
        await poll(first)  # the progress is posted; the process dies
    posted = [ts for _, ts, _, parent in first.messenger.posted if parent == request.card_message]
    assert len(posted) == 1 and (await first.only_request()).progress_message is None
    second = make_bot(clock, policy, same_world_as=first)
    if refused:
        second.messenger.keys.clear()  # history the bot cannot read: nothing is found
    clock.advance(20)  # the dead one's lease has run out; its post may still be in flight
    await poll(second)
    assert len(second.messenger.posted) == len(first.messenger.posted)  # nothing said yet
    [operation] = second.plane.operations
    second.plane.finish(operation)
    clock.advance(POST_WINDOW)
    await poll(second)
    ended = await second.only_request()
    assert ended.state == RequestState.SUCCEEDED
    thread = [r for _, _, r, parent in second.messenger.posted if parent == request.card_message]
    ends = [r for r in thread if "your request" not in text(r)]
    assert len(ends) == (2 if refused else 1), [text(r) for r in thread]
    if refused:  # a stale progress line at worst, and the end told in its own
        assert "finished in" in text(ends[-1])
    else:  # the post the dead one made is the one edited to the end
        assert ended.progress_message == posted[0]
        assert "finished in" in text(second.edits_of(ended.progress_message)[-1])


async def poll(bot: Bot) -> int:
    """One tick of the tracker (the polls due, each one attempt of the follow worker), and
    what the polls left owed to the tick after it (an end told, its lines): how many polled."""
    engine = bot.services.engine
    polled = await engine.run_due([FOLLOW])
    others = [kind for kind in engine.workers if kind != FOLLOW]
    for _ in range(10):  # as many ticks as it takes, a room's worth each
        if not await engine.run_due(others):
            break
    return polled


async def resizes_running(bot: Bot, count: int) -> None:
    """``count`` clusters c1… each with an approved resize whose operation runs."""
    for index in range(2, count + 1):
        bot.plane.add(running(cluster_doc(cluster_id=f"c{index}", nodes=2), nodes=2))
    for index in range(1, count + 1):
        assert await bot.ask("U0ALICE", f"resize c{index} gpu 3") is None
    for request in await bot.store.requests_in(["pending"]):
        await bot.click("U0BOB", "approve", request.id)


async def test_a_ticks_polls_are_started_apart_not_in_one_turn(bot: Bot) -> None:
    """With a spread, a tick's polls start ``spread / due`` apart (the service spreads them
    over a quarter of its tick), so a Slack request never waits behind all of them."""
    await resizes_running(bot, 5)
    assert len(bot.plane.operations) == 5
    starts: list[float] = []
    asked = bot.plane.get_operation

    async def recorded(name: str) -> Any:
        starts.append(asyncio.get_running_loop().time())
        return await asked(name)

    bot.plane.get_operation = recorded  # type: ignore[method-assign]
    bot.services.engine.rooms[FOLLOW] = Room(POLLS_AT_ONCE, spread=0.2)
    bot.clock.advance(2)
    began = asyncio.get_running_loop().time()
    assert await poll(bot) == 5
    # each poll waits its place from the tick's start (a busy machine only makes it later)
    gap = 0.2 / 5
    assert len(starts) == 5 and all(s - began >= i * gap for i, s in enumerate(starts)), starts
    assert starts[-1] - starts[0] >= gap, starts  # not all in one turn of the loop


async def test_a_slow_poll_does_not_hold_up_the_next_tick(bot: Bot) -> None:
    """A poll that waits long (a final message waiting its turn under Slack's limits) goes
    on by itself after the tick's patience, still leased; the next tick polls the others."""
    await resizes_running(bot, 3)
    slow_name = sorted(bot.plane.operations)[0]
    held = asyncio.Event()
    polled: list[str] = []
    asked = bot.plane.get_operation

    async def recorded(name: str) -> Any:
        polled.append(name)
        if name == slow_name:
            await held.wait()
        return await asked(name)

    bot.plane.get_operation = recorded  # type: ignore[method-assign]
    engine = bot.services.engine
    engine.patience = 0.05
    bot.clock.advance(2)
    assert await poll(bot) == 3  # returns, though one poll still waits
    assert len(engine.running) == 1
    bot.clock.advance(3)
    assert await poll(bot) == 2  # the other two again; the slow one stays leased
    assert polled.count(slow_name) == 1
    held.set()
    await asyncio.wait([r.task for r in engine.running.values()], timeout=5.0)
    assert not engine.running
    slow = await bot.store.get_operation(slow_name)
    assert slow is not None
    item = await bot.store.get_owed(follow_key(slow.request_id))
    assert item is not None and item.owner is None and item.due_at > bot.clock()


async def test_a_poll_that_learns_nothing_new_writes_nothing(bot: Bot) -> None:
    """Once an operation is polled at its longest step and says the same words, a poll
    writes nothing to its row (the engine keeps when it is polled next); the control plane's
    new words are written at the poll that reads them."""
    await resizes_running(bot, 1)
    [name] = bot.plane.operations
    writes: list[dict[str, Any]] = []
    kept = bot.store.update_operation

    async def recorded(operation: str, **changes: Any) -> None:
        writes.append(changes)
        await kept(operation, **changes)

    bot.store.update_operation = recorded  # type: ignore[method-assign]
    for _ in range(12):  # from the first step, half as long again each time, to the longest
        bot.clock.advance(MAX_INTERVAL)
        assert await poll(bot) == 1
    following = await bot.store.get_operation(name)
    assert following is not None and following.interval == MAX_INTERVAL
    assert writes, "the growing steps were written"
    writes.clear()
    for _ in range(3):
        bot.clock.advance(MAX_INTERVAL)
        assert await poll(bot) == 1
    assert writes == []
    bot.plane.operations[name].metadata = {"progressMessage": "resizing the pool"}
    bot.clock.advance(MAX_INTERVAL)
    assert await poll(bot) == 1
    assert [w.get("progress") for w in writes] == ["resizing the pool"]
    assert "next_poll_at" not in writes[0]


async def test_a_poll_reads_its_row_only_when_another_poll_came_between(bot: Bot) -> None:
    """A replica's polls of one operation read its row once: each next poll starts from what
    the last one left. Once another replica has polled it (and written what it learned), the
    first reads the row again and does not write that again."""
    await resizes_running(bot, 1)
    [name] = bot.plane.operations
    reads: list[str] = []
    writes: list[dict[str, Any]] = []  # both replicas' writes: the store is shared
    read, kept = bot.store.get_operation, bot.store.update_operation

    async def reading(operation: str) -> Any:
        reads.append(operation)
        return await read(operation)

    async def writing(operation: str, **changes: Any) -> None:
        writes.append(changes)
        await kept(operation, **changes)

    bot.store.get_operation = reading  # type: ignore[method-assign]
    bot.store.update_operation = writing  # type: ignore[method-assign]
    for _ in range(6):
        bot.clock.advance(MAX_INTERVAL)
        assert await poll(bot) == 1
    assert reads == [name], "the first poll reads the row, the next ones start from it"
    following = await read(name)
    assert following is not None and following.interval == 1.5**6  # each step written
    other = make_bot(bot.clock, Policy.model_validate(POLICY), same_world_as=bot, owner="b")
    bot.plane.operations[name].metadata = {"progressMessage": "resizing the pool"}
    bot.clock.advance(MAX_INTERVAL)
    assert await poll(other) == 1
    learned = await read(name)
    assert learned is not None and learned.progress == "resizing the pool"
    reads.clear()
    writes.clear()
    bot.clock.advance(MAX_INTERVAL)
    assert await poll(bot) == 1
    assert reads == [name], "polled elsewhere since: the row is read again"
    assert all("progress" not in changes for changes in writes), writes
    after = await read(name)
    assert after is not None and after.interval == MAX_INTERVAL


@pytest.mark.parametrize("point", ["after-draft", "card-posted"])
async def test_a_card_cut_off_by_a_crash_is_posted_once_and_its_request_kept(
    clock: ManualClock, point: str
) -> None:
    """The card is owed with its draft: a stop before the post, or between the post and its
    record, loses nothing. The replica that takes it up posts it (or finds the post cut off,
    by its key, once the post can no longer arrive) and makes the request pending: one card,
    nobody told to ask again, and a draft past its minute is not abandoned while owed."""
    policy = Policy.model_validate(POLICY)
    first = make_bot(clock, policy, crash=dies_at(point))
    with pytest.raises(Died):
        await first.ask("U0ALICE", "resize c1 gpu 3")
    [draft] = await first.store.requests_in(["draft"])
    again = make_bot(clock, policy, same_world_as=first, owner="me")  # the same replica
    assert await again.services.approvals.abandon_own_drafts() == 0  # owed, not abandoned
    clock.advance(POST_WINDOW + 1)  # past the lease, and past the window of a post cut off
    assert await again.services.approvals.expire_due() == 0
    assert await again.services.engine.run_due() == 1
    [(card_ts, card)] = again.cards()  # one card, whichever step was cut off
    assert "Resize request: c1 / gpu" in text(card) and "(approve)" in text(card)
    request = await again.only_request()
    assert (request.id, request.state, request.card_message) == (
        draft.id,
        RequestState.PENDING,
        card_ts,
    )
    asked = [e for e in again.store.entries if e.action == "requested"]
    assert [(e.request_id, e.actor) for e in asked] == [(draft.id, "U0ALICE")]
    assert again.messenger.whispers == []
    busy = await again.ask("U0ALICE", "resize c1 gpu 3")  # kept: the cluster has it open
    assert busy is not None and draft.id in text(busy)
    await again.click("U0BOB", "approve", draft.id)
    assert len(again.plane.patches) == 1


async def test_a_card_slack_cannot_take_yet_is_posted_later_and_its_asker_told_it_comes(
    clock: ManualClock,
) -> None:
    """Slack failing the post (or the store, between the post and its record) does not drop
    the request: the asker is told the card comes, and the engine posts it at its next try."""
    bot = make_bot(clock, Policy.model_validate(POLICY))
    bot.messenger.refuse = "internal_error"
    answer = await bot.ask("U0ALICE", "resize c1 gpu 3")
    assert answer is not None and answer.summary == "Card on its way", answer
    assert "(last try: internal_error)" in text(answer)
    assert "nothing needs to be asked again" in text(answer)
    assert bot.cards() == [] and (await bot.only_request()).state == RequestState.DRAFT
    bot.messenger.refuse = None
    clock.advance(DRAFT_TIMEOUT + 1)  # a minute on: still owed, so not abandoned
    assert await bot.services.approvals.expire_due() == 0
    assert await bot.services.engine.run_due() == 1
    [(card_ts, _)] = bot.cards()
    request = await bot.only_request()
    assert (request.state, request.card_message) == (RequestState.PENDING, card_ts)


async def test_a_card_the_bot_may_not_post_keeps_nothing_and_says_why(bot: Bot) -> None:
    bot.messenger.refuse_in[INFRA] = "not_in_channel"
    answer = await bot.ask("U0ALICE", "resize c1 gpu 3")
    assert answer is not None and "/invite @clusterbot" in text(answer), answer
    assert "not_in_channel" in text(answer) and "Nothing was requested" in text(answer)
    assert await bot.store.requests_in(list(RequestState)) == []  # the cluster is free
    assert bot.cards() == [] and await bot.services.engine.owed_now() == []


async def test_a_sweep_cut_off_between_the_ledger_and_the_records_writes_one_row(
    clock: ManualClock,
) -> None:
    """The ledger is written first: a crash before the spend records are saved leaves the
    record's run open, and the next sweep (a restart) writes the same row again, once, with
    its latest end."""
    policy = Policy.model_validate(POLICY)
    sweeps = 0

    def second_sweep_dies(step: str) -> None:
        nonlocal sweeps
        if step == "after-spend":
            sweeps += 1
            if sweeps == 2:
                raise Died(step)

    first = make_bot(clock, policy, crash=second_sweep_dies)
    first.activity.queues[C1] = (1, 0)
    start = clock.now
    await sweep(first)
    first.plane.add(running(cluster_doc(cluster_id="c1", nodes=4), nodes=4))
    clock.advance(60)
    with pytest.raises(Died):
        await sweep(first)
    [written] = first.store.spend.values()
    assert (written.nodes, written.start, written.end) == (2, start, start + 60)
    again = make_bot(clock, policy, same_world_as=first)
    clock.advance(60)
    await sweep(again)
    [row] = again.store.spend.values()  # the same row, not a second one
    assert (row.pool, row.nodes, row.start, row.end) == ("gpu", 2, start, start + 120)
    record, _ = await again.keeper.of(SPEND_RECORD).get(C1)
    assert {(r.pool, r.nodes, r.start) for r in record.runs} == {
        ("gpu", 4, start + 120),
        ("login", 1, start),
    }


# -- forms, in plain text ----------------------------------------------------------------------


async def test_a_forms_life_runs_on_the_core_alone(bot: Bot) -> None:
    """The resize form a command opens, filled once the cluster is read, redrawn as a count
    is typed, and submitted into the same request as the typed command: all on the core's
    form model, read in plain text, with no platform."""
    core = bot.services
    flow = FormFlow(Forms(core.directory, core.approvals.prices), core.dispatcher, None)
    read = dispatch.read("resize c1")
    assert read.form is not None
    state = state_of(read.form, INFRA)
    opening = form_text(flow.first(state))
    assert opening.startswith("# Resize a node pool") and "Looking up c1…" in opening
    filled = form_text(await flow.filled(state, None))
    assert "[Cluster: find = " + C1 + "] *" in filled and "  - gpu · a3-ultragpu-8g" in filled
    count = Entry(text="-1", scope="gpu")
    typed = {"cluster": Entry(choice=C1), "pool": Entry(choice="gpu"), "min": count}
    redrawn = await flow.changed(state, typed)
    assert redrawn is not None
    assert "  (!) MIN -1: a node count cannot be negative" in form_text(redrawn)
    other = await flow.changed(state, {**typed, "min": Entry(text="-1", scope="a4")})
    assert other is not None and "(!)" not in form_text(other)  # typed for another pool
    assert "[Min nodes: count = 2] *" in form_text(other)  # afresh at this pool's own
    wrong = await flow.submitted("U0ALICE", state, {**typed, "min": Entry(text="x", scope="gpu")})
    assert wrong == {"min": "'x' is not a whole number of nodes"} and bot.cards() == []
    fine = {**typed, "min": Entry(text="3"), "max": Entry(text="3")}
    assert await flow.submitted("U0ALICE", state, fine) == {}
    [(_, card)] = bot.cards()
    assert "Resize request: c1 / gpu" in text(card)
    refused = await flow.submitted("U0CAROL", state, fine)  # a viewer: shown at the last field
    assert list(refused) == ["max"] and len(bot.cards()) == 1, refused


async def test_a_sweep_cut_off_as_its_lease_is_taken_gives_it_back(bot: Bot) -> None:
    """The service vanishes (its sweep is cancelled) just after the database gave the sweep's
    lease and before the answer came back: the lease is given back, not held until it runs
    out while a replacement waits."""
    given = asyncio.Event()
    store = bot.store
    take = store.take_lease

    async def given_then_cut_off(*args: Any, **kwargs: Any) -> bool:
        taken = await take(*args, **kwargs)
        given.set()
        await asyncio.Event().wait()  # the answer never comes back: cut off here
        return taken

    store.take_lease = given_then_cut_off  # type: ignore[method-assign]
    sweeping = asyncio.create_task(bot.services.sweeper.sweep(force=True))
    await given.wait()
    assert store.leases[SWEEP_LEASE]["owner"] == "me"
    sweeping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sweeping
    assert store.leases[SWEEP_LEASE]["owner"] is None
