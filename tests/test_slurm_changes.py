"""slurm.conf settings changed through approval: `/cluster slurm CLUSTER set|unset …`, the card's
diff, the PATCH (mask and whole map) and the applied result, and what is refused first."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from handlers.changes.kinds import kind_of
from handlers.changes.plan import PlanError
from handlers.changes.settings import plan_slurm_config
from handlers.costs import PriceBook
from handlers.domain.models import Cluster
from handlers.grammar import CommandError
from handlers.slurm.commands import Slurm, SlurmConfig
from tests.support.demo_stack import TRAIN01, Stack, demo_stack, text_of, thread_of
from tests.support.words import parse
from tests.test_cards_golden import demo_cluster


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        yield running


async def test_a_setting_is_approved_sent_whole_and_applied(stack: Stack) -> None:
    command = "/cluster slurm train01 set PreemptMode=REQUEUE preemptexempttime=00:10:00"
    card = await stack.card("alice", command)
    text = text_of(card)
    for fact in (
        "Slurm settings request: train01",
        "<@U0ALICE> asks to change the slurm.conf settings of *train01*",
        "set PreemptMode = REQUEUE",
        "PreemptExemptTime  (not set)  00:10:00",  # the key as SchedMD spells it
        "REQUEUE puts it back in the queue",
        "a job runs at least this long before it can be preempted",
        "updateMask `orchestrator_spec.slurm_spec.config`",
    ):
        assert fact in text, fact
    assert (await stack.click("bob", card["ts"], "approve"))["status"] == 200
    messages = await stack.wait(
        lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), limit=20
    )
    final_card = next(m for m in messages if m["ts"] == card["ts"])
    assert "*Done*: approved by <@U0BOB>" in text_of(final_card)
    [patch] = await stack.requests("PATCH")
    assert patch["query"] == {"updateMask": "orchestrator_spec.slurm_spec.config"}
    config = stack.simulator.clusters[TRAIN01]["orchestratorSpec"]["slurmSpec"]["config"]
    assert config == {  # the keys the cluster had are kept: the map is replaced whole
        "PriorityType": "priority/multifactor",
        "PriorityWeightFairshare": "10000",
        "PreemptMode": "REQUEUE",
        "PreemptExemptTime": "00:10:00",
    }
    shown = text_of(await stack.reply_to("carol", "/cluster slurm train01"))
    assert "PreemptMode              REQUEUE" in shown


async def test_unset_and_refusals_before_any_card(stack: Stack) -> None:
    refusals = {
        "/cluster slurm train01 set PurgeJobAfter=1": "managed by the service",
        "/cluster slurm train01 set Prolog=/x.sh": "use the prolog/epilog scripts",
        "/cluster slurm train01 set PreemptMode=SOMETIMES": "PreemptMode=SOMETIMES is not valid",
        "/cluster slurm train01 unset PreemptMode": "PreemptMode is not set on train01",
        "/cluster slurm train01 set PriorityWeightFairshare=10000": "nothing would change",
        "/cluster slurm train01 set PreemptMode": "'PreemptMode' is not KEY=VALUE",
        "/cluster slurm train01 drop X": "use set, unset, partition, login-pool, prolog or epilog",
    }
    for command, reason in refusals.items():
        reply = text_of(await stack.reply_to("alice", command))
        assert reason in reply, (command, reply)
        assert "Usage: /cluster slurm CLUSTER" in reply
    viewer = text_of(await stack.reply_to("carol", "/cluster slurm train01 unset PriorityType"))
    assert "needs the operator role; you are viewer" in viewer
    card = await stack.card("alice", "/cluster slurm train01 unset prioritytype")
    assert "unset PriorityType (was priority/multifactor)" in text_of(card)
    assert await stack.requests("PATCH") == []  # nothing is sent before an approval


def test_the_plan_keeps_every_other_key_and_knows_when_it_is_applied() -> None:
    cluster = demo_cluster("train01")
    plan = plan_slurm_config(
        cluster, {"PreemptMode": "REQUEUE"}, ["prioritytype"], PriceBook.with_overrides()
    )
    assert plan.kind == "slurm_config" and plan.cost_before == plan.cost_after
    patched = kind_of(plan).apply(cluster, plan)
    assert patched.slurm.config == {"PriorityWeightFairshare": "10000", "PreemptMode": "REQUEUE"}
    assert patched.slurm.prolog_bash_scripts == cluster.slurm.prolog_bash_scripts
    assert not kind_of(plan).applied(plan, cluster) and kind_of(plan).applied(plan, patched)
    # the server may keep a key in its own spelling: still applied
    document = patched.to_api()
    document["orchestratorSpec"]["slurmSpec"]["config"] = {
        "priorityweightfairshare": "10000",
        "PREEMPTMODE": "REQUEUE",
    }
    assert kind_of(plan).applied(plan, Cluster.model_validate(document))
    stopped = demo_cluster("train01").model_copy(deep=True)
    assert stopped.cluster_status is not None
    stopped.cluster_status.state = "UPDATING"
    with pytest.raises(PlanError, match="changes can be requested when it is RUNNING"):
        plan_slurm_config(stopped, {"PreemptMode": "OFF"}, [], PriceBook.with_overrides())


def test_the_grammar() -> None:
    assert parse("slurm train01") == Slurm("train01")
    assert parse("slurm train01 SET A=1 b=x=y") == SlurmConfig(
        "train01", sets=(("A", "1"), ("b", "x=y"))
    )
    assert parse("slurm train01 unset A B A") == SlurmConfig("train01", unsets=("A", "B"))
    with pytest.raises(CommandError, match="given twice"):
        parse("slurm train01 set A=1 a=2")
