"""Health alerts on the core: a node fails and one alert is posted; it worsens and the same
alert is edited; Resume, asked from the alert and approved by a second person, sends one node
update; the next sweep edits the alert to say healed. Replicas sweeping the same world post
it once, and a problem back within the quiet period edits the same alert again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from handlers import dispatch
from handlers.domain.errors import SlurmRefusedError
from handlers.domain.operations import SlurmJob, SlurmNode
from handlers.entities import RequestState
from handlers.forms.choices import Forms
from handlers.forms.flow import FormFlow, state_of
from handlers.forms.model import Entry
from handlers.health.channels import HEALTH_TABLE
from handlers.health.episodes import QUIET
from handlers.policy import Policy
from tests.conftest import ManualClock
from tests.support.text_adapter import form_text, text
from tests.test_services_unit import ALERTS, C1, POLICY, Bot, make_bot

XID = "Xid 79: GPU has fallen off the bus"


@dataclass
class Slurm:
    """c1's Slurm: node states that a test sets, and RESUME and DRAIN as slurmctld takes
    them (update_node refuses a RESUME of a node in service, as node_mgr.c does)."""

    states: dict[str, set[str]] = field(
        default_factory=lambda: {"c1-gpu-0": {"IDLE"}, "c1-gpu-1": {"IDLE"}}
    )
    reasons: dict[str, str] = field(default_factory=dict)
    updates: list[tuple[str, tuple[str, ...], str | None]] = field(default_factory=list)

    def fail(self, node: str, *flags: str, reason: str = XID) -> None:
        self.states[node] = {"IDLE", *flags}
        self.reasons[node] = reason

    async def jobs(self, cluster: str) -> list[SlurmJob]:
        return []

    async def nodes(self, cluster: str) -> list[SlurmNode]:
        return [
            SlurmNode(name, frozenset(states), self.reasons.get(name, ""), ("gpu",), "root")
            for name, states in sorted(self.states.items())
        ]

    async def shares(self, cluster: str) -> list[object]:
        return []

    async def update_node(
        self, cluster: str, node: str, states: Sequence[str], reason: str | None = None
    ) -> None:
        self.updates.append((node, tuple(states), reason))
        if "RESUME" in states:
            if not self.states[node] & {"DOWN", "DRAIN", "FAIL"}:
                raise SlurmRefusedError("Invalid node state transition", 422)
            self.states[node] = {"IDLE"}
            self.reasons.pop(node, None)
        elif "DRAIN" in states:
            self.states[node] |= {"DRAIN"}
            self.reasons[node] = reason or ""


def health_bot(clock: ManualClock, slurm: Slurm, same_world_as: Bot | None = None) -> Bot:
    policy = Policy.model_validate(POLICY)
    return make_bot(clock, policy, same_world_as=same_world_as, activity=slurm, nodes=slurm)  # type: ignore[arg-type]


def alerts(bot: Bot) -> list[tuple[str, str]]:
    """The health alerts posted: their ts and text."""
    return [
        (ts, text(reply))
        for channel, ts, reply, thread in bot.messenger.posted
        if channel == ALERTS and reply.summary.startswith("Health:")
    ]


async def sweep(bot: Bot) -> None:
    bot.clock.advance(60)
    await bot.services.sweeper.sweep(force=True)


async def test_one_alert_an_episode_edited_until_a_resume_heals_it(clock: ManualClock) -> None:
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    bot = health_bot(clock, slurm)
    await sweep(bot)
    assert alerts(bot) == []  # healthy: nothing to say

    slurm.fail("c1-gpu-1", "DRAIN")
    await sweep(bot)
    [(ts, shown)] = alerts(bot)
    assert "c1-gpu-1  drained  Xid 79: GPU has fallen off the bus  root" in shown
    assert "[Resume c1-gpu-1](health_resume)" in shown and "Snooze" in shown
    await sweep(bot)
    # the same problems a minute later: not posted again, but its figures are kept current
    [current] = bot.edits_of(ts)
    assert len(alerts(bot)) == 1 and text(current) != shown
    assert "Cost since alerted: ~$1.41" in text(current)  # a minute at ~$84.81/h
    await bot.services.sweeper.sweep(force=True)  # no time passed: nothing to redraw
    assert len(bot.edits_of(ts)) == 1

    slurm.fail("c1-gpu-0", "DOWN", reason="Not responding")
    await sweep(bot)
    assert len(alerts(bot)) == 1  # worse: the same alert, edited
    worse = text(bot.edits_of(ts)[-1])
    assert "2 nodes out of service" in worse and "c1-gpu-0  down" in worse
    assert "[Resume a node… ▾" in worse and "resize its pool down and up" in worse

    refused = await bot.click("U0CAROL", "health_resume", f"{C1}|c1-gpu-1")
    assert refused is not None and "needs the operator role" in text(refused)
    asked = await bot.click("U0ALICE", "health_resume", f"{C1}|c1-gpu-1")
    assert asked is not None and "Asked: request" in text(asked)
    request = await bot.only_request()
    card = text(bot.cards()[-1][1])
    assert "Resume node request: c1 / c1-gpu-1" in card and "Xid 79" in card
    assert slurm.updates == []  # nothing before a second person approves
    await bot.click("U0BOB", "approve", request.id)
    assert slurm.updates == [("c1-gpu-1", ("RESUME",), None)]  # one node update
    done = await bot.store.get_request(request.id)
    assert done is not None and done.state == RequestState.SUCCEEDED
    assert done.outcome == "c1-gpu-1 is back in service"
    assert "Resume c1-gpu-1* (request" in text(bot.edits_of(ts)[-1])
    audit = [e.action for e in await bot.store.audit_log(cluster=C1)]
    assert "approved" in audit

    await sweep(bot)
    better = text(bot.edits_of(ts)[-1])  # better: the resumed node is gone from it
    assert "1 node out of service" in better and "c1-gpu-1  drained" not in better
    slurm.states["c1-gpu-0"] = {"IDLE"}  # back by itself
    await sweep(bot)
    healed = text(bot.edits_of(ts)[-1])
    assert "*Healed*: c1" in healed and "health_resume" not in healed
    assert len(alerts(bot)) == 1
    report = await bot.services.sweeper.latest()
    assert report is not None and report.tallies == {"episodes": {"healed": 1}}


async def test_a_problem_back_within_the_quiet_period_edits_the_same_alert(
    clock: ManualClock,
) -> None:
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    bot = health_bot(clock, slurm)
    slurm.fail("c1-gpu-1", "DRAIN")
    await sweep(bot)
    slurm.states["c1-gpu-1"] = {"IDLE"}
    await sweep(bot)
    slurm.fail("c1-gpu-1", "DRAIN")
    await sweep(bot)  # a minute after healing
    [(ts, _)] = alerts(bot)
    assert "c1-gpu-1  drained" in text(bot.edits_of(ts)[-1])
    slurm.states["c1-gpu-1"] = {"IDLE"}
    await sweep(bot)
    clock.advance(QUIET)
    slurm.fail("c1-gpu-1", "DRAIN")
    await sweep(bot)  # past the quiet period: a new episode, a new alert
    assert len(alerts(bot)) == 2


async def test_two_replicas_post_one_alert(clock: ManualClock) -> None:
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    first = health_bot(clock, slurm)
    second = health_bot(clock, slurm, same_world_as=first)
    slurm.fail("c1-gpu-1", "DRAIN")
    await sweep(first)
    await second.services.sweeper.sweep(force=True)
    await sweep(second)
    assert len(alerts(first)) == 1


async def test_a_snooze_holds_back_the_next_episodes_alert(clock: ManualClock) -> None:
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    bot = health_bot(clock, slurm)
    slurm.fail("c1-gpu-1", "DRAIN")
    await sweep(bot)
    answer = await bot.click("U0ALICE", "health_snooze", f"{24 * 3600}|{C1}")
    assert answer is not None and "No new health alert for it until" in text(answer)
    [(ts, _)] = alerts(bot)
    snoozed = text(bot.edits_of(ts)[-1])  # drawn again with its note, its target as before
    assert "Snoozed by @U0ALICE." in snoozed and "*c1* (`demo-project/us-central1`)" in snoozed
    slurm.states["c1-gpu-1"] = {"IDLE"}
    await sweep(bot)
    clock.advance(QUIET)
    slurm.fail("c1-gpu-1", "DRAIN")
    await sweep(bot)
    assert len(alerts(bot)) == 1  # the new episode is not posted while snoozed
    health = text(await bot.ask("U0CAROL", "health c1"))
    assert "c1-gpu-1  drained" in health  # and still shown where asked


async def test_a_node_typed_shown_drained_with_a_reason_and_its_form(clock: ManualClock) -> None:
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    slurm.fail("c1-gpu-1", "DRAIN")
    bot = health_bot(clock, slurm)
    shown = text(await bot.ask("U0CAROL", "node c1 c1-gpu-1"))
    assert "# c1-gpu-1 of c1" in shown and "Slurm state: DRAIN+IDLE" in shown
    assert (
        "Reason: Xid 79: GPU has fallen off the bus" in shown and "In service: no: drained" in shown
    )
    for words, said in (
        ("node c1", "node needs NODE"),
        ("node c1 c1-gpu-0 reboot", "a node can be resumed or drained, not 'reboot'"),
        ("node c1 c1-gpu-0 drain", "drain needs a reason"),
        ("node c1 c1-gpu-0 resume now", "resume takes no reason"),
        ("node c1 c1-gpu-0 resume", "c1-gpu-0 is in service: there is nothing to resume"),
        ("node c1 c1-gpu-9 resume", "Slurm has no node c1-gpu-9 in c1"),
    ):
        answer = text(await bot.ask("U0ALICE", words))
        assert said in answer, (words, answer)
    refused = text(await bot.ask("U0CAROL", "node c1 c1-gpu-0 drain flaky NVLink"))
    assert "needs the operator role" in refused

    await bot.ask("U0ALICE", "node c1 c1-gpu-0 drain flaky NVLink, see ticket 4711")
    request = await bot.only_request()
    card = text(bot.cards()[-1][1])
    assert "Drain node request: c1 / c1-gpu-0" in card and "flaky NVLink, see ticket 4711" in card
    await bot.click("U0BOB", "approve", request.id)
    assert slurm.updates == [("c1-gpu-0", ("DRAIN",), "flaky NVLink, see ticket 4711")]
    done = await bot.store.get_request(request.id)
    assert done is not None and done.state == RequestState.SUCCEEDED
    again = text(await bot.ask("U0ALICE", "node c1 c1-gpu-0 drain still flaky"))
    assert "c1-gpu-0 is drained already" in again


async def test_the_drain_form_asks_for_the_reason(clock: ManualClock) -> None:
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    bot = health_bot(clock, slurm)
    core = bot.services
    flow = FormFlow(Forms(core.directory, core.approvals.prices), core.dispatcher, None)
    read = dispatch.read("node c1 c1-gpu-0 drain")
    assert read.form is not None
    state = state_of(read.form, "C0INFRA")
    opening = form_text(flow.first(state))
    assert opening.startswith("# Drain a Slurm node") and "Looking up c1" in opening
    filled = form_text(await flow.filled(state, None))
    assert (
        "Drain *c1-gpu-0* of *c1*." in filled
        and "[Reason (Slurm keeps it on the node): line] *" in filled
    )
    assert await flow.submitted("U0ALICE", state, {"reason": Entry(text="  ")}) == {
        "reason": "a drain needs a reason"
    }
    assert await flow.submitted("U0ALICE", state, {"reason": Entry(text="bad DIMM")}) == {}
    request = await bot.only_request()
    assert request.plan.detail.reason == "bad DIMM" and request.plan.kind == "node_drain"


async def test_show_from_the_alert(clock: ManualClock) -> None:
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    slurm.fail("c1-gpu-1", "DRAIN")
    bot = health_bot(clock, slurm)
    await sweep(bot)
    [(_, shown)] = alerts(bot)
    assert "[Show c1-gpu-1](health_show)" in shown
    detail = await bot.click("U0CAROL", "health_show", f"{C1}|c1-gpu-1")
    assert detail is not None and "Slurm state: DRAIN+IDLE" in text(detail)


async def test_the_policy_names_a_clusters_health_channel(clock: ManualClock) -> None:
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    policy = Policy.model_validate({**POLICY, "health": {"channels": {"c*": "C0GPUOPS"}}})
    bot = make_bot(clock, policy, activity=slurm, nodes=slurm)  # type: ignore[arg-type]
    slurm.fail("c1-gpu-1", "DRAIN")
    await sweep(bot)
    posted = [(c, r.summary) for c, _, r, _ in bot.messenger.posted]
    assert posted == [("C0GPUOPS", "Health: c1: 1 node drained")]
    assert policy.section(HEALTH_TABLE).channel_for("train01") is None  # others: the alert channel


async def test_a_deleted_clusters_alert_says_so(clock: ManualClock) -> None:
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    bot = health_bot(clock, slurm)
    slurm.fail("c1-gpu-1", "DRAIN")
    await sweep(bot)
    [(ts, _)] = alerts(bot)
    del bot.plane.clusters[C1]
    await sweep(bot)
    assert "*Deleted*: c1 no longer exists" in text(bot.edits_of(ts)[-1])


async def test_a_late_note_never_draws_a_healed_alert_back(clock: ManualClock) -> None:
    """The note that a Resume ended ("done: back in service") is held back by Slack's rate
    limit; meanwhile a sweep finds the node healed and draws the alert so. When the note's
    turn comes, the alert has moved on: it is not drawn back to the state it was noted on."""
    clock.now = 1_795_424_400.0
    slurm = Slurm()
    bot = health_bot(clock, slurm)
    slurm.fail("c1-gpu-1", "DRAIN")
    await sweep(bot)
    [(ts, _)] = alerts(bot)
    await bot.click("U0ALICE", "health_resume", f"{C1}|c1-gpu-1")
    request = await bot.only_request()
    bot.messenger.refuse_edits[ts] = "ratelimited"  # the ended note waits its turn
    await bot.click("U0BOB", "approve", request.id)
    del bot.messenger.refuse_edits[ts]
    await sweep(bot)
    assert "*Healed*: c1" in text(bot.edits_of(ts)[-1])
    clock.advance(3600)  # every note and retry due again
    await bot.services.engine.run_due()
    await bot.services.engine.run_due()
    assert "*Healed*: c1" in text(bot.edits_of(ts)[-1])  # still healed, whatever came late
