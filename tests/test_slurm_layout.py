"""Partitions, the default partition and the login pool changed through approval:
`/cluster slurm CLUSTER partition add|remove|default …` and `login-pool POOL`, the card's
before and after, the PATCH (its mask and the whole partition list), and what is refused
before any card."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from handlers.changes.layout import SLURM_LAYOUT as KIND
from handlers.changes.layout import plan_slurm_layout
from handlers.changes.plan import PlanError
from handlers.costs import PriceBook
from handlers.domain.models import Cluster
from handlers.grammar import CommandError
from handlers.slurm.commands import SlurmLayout
from handlers.slurm.layout import LayoutAction
from tests.support.demo_stack import TRAIN01, Stack, demo_stack, text_of, thread_of
from tests.support.words import parse
from tests.test_cards_golden import demo_cluster

PRICES = PriceBook.with_overrides()
ADD, REMOVE = LayoutAction.PARTITION_ADD, LayoutAction.PARTITION_REMOVE
DEFAULT, LOGIN = LayoutAction.PARTITION_DEFAULT, LayoutAction.LOGIN_POOL


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        yield running


def slurm_spec(stack: Stack) -> dict[str, Any]:
    return dict(stack.simulator.clusters[TRAIN01]["orchestratorSpec"]["slurmSpec"])


async def approved(stack: Stack, command: str, facts: tuple[str, ...]) -> dict[str, Any]:
    """Ask as alice, check the card, approve as bob, and wait for the thread's done."""
    card = await stack.card("alice", command)
    text = text_of(card)
    for fact in facts:
        assert fact in text, (fact, text)
    assert (await stack.click("bob", card["ts"], "approve"))["status"] == 200
    await stack.wait(lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), 20)
    return card


async def test_a_partition_is_added_made_default_and_the_old_one_removed(stack: Stack) -> None:
    await approved(
        stack,
        "/cluster slurm train01 partition add debug a4",
        (
            "Slurm partitions request: train01",
            "add partition debug with a4",
            "partition debug    (new)   a4",
            "default partition  a4      a4",  # appended: the default does not move
            "updateMask `orchestrator_spec.slurm_spec.partitions`",
        ),
    )
    [patch] = await stack.requests("PATCH")
    assert patch["query"] == {"updateMask": "orchestrator_spec.slurm_spec.partitions"}
    spec = slurm_spec(stack)
    assert [(p["id"], p["nodePoolIds"]) for p in spec["partitions"]] == [
        ("a4", ["a4"]),
        ("debug", ["a4"]),
    ]
    refused = text_of(await stack.reply_to("alice", "/cluster slurm train01 partition remove a4"))
    assert "'a4' is the default partition of train01" in refused

    await approved(
        stack,
        "/cluster slurm train01 partition default debug",
        ("default partition: a4 → debug", "default_partition_id"),
    )
    assert slurm_spec(stack)["defaultPartitionId"] == "debug"
    await approved(
        stack,
        "/cluster slurm train01 partition remove a4",
        ("remove partition a4", "partition a4       a4      (removed)"),
    )
    spec = slurm_spec(stack)
    assert [p["id"] for p in spec["partitions"]] == ["debug"]
    assert spec["config"]["PriorityType"] == "priority/multifactor"  # the rest is untouched
    shown = text_of(await stack.reply_to("carol", "/cluster slurm train01"))
    assert "debug" in shown


async def test_refusals_come_before_any_card(stack: Stack) -> None:
    refusals = {
        "partition add a4 a4": "train01 already has a partition 'a4'",
        "partition add gpu a9": "train01 has no node pool 'a9'; its pools are a4, login",
        "partition add gpu login": "'login' is the login pool of train01",
        "partition remove nope": "train01 has no partition 'nope'; its partitions are a4",
        "partition default a4": "'a4' is already the default partition of train01",
        "partition add Debug a4": "'Debug' is not a partition id",
        "partition add gpu a4,a4": "names a pool twice",
        "partition drop a4": "slurm partition does not take 'drop'",
        "partition remove": "slurm partition remove: use partition add",
        "login-pool a4": "'a4' runs jobs in partition a4; a login pool runs none",
        "login-pool login": "'login' is already the login pool of train01",
        "login-pool": "slurm login-pool takes one POOL",
    }
    for words, reason in refusals.items():
        reply = text_of(await stack.reply_to("alice", f"/cluster slurm train01 {words}"))
        assert reason in reply, (words, reply)
    viewer = text_of(await stack.reply_to("carol", "/cluster slurm train01 partition add x a4"))
    assert "needs the operator role; you are viewer" in viewer
    assert await stack.requests("PATCH") == []


def two_partitions() -> Cluster:
    """train01 with a second compute pool, two partitions and a partition config the bot
    does not model beyond the map, and a field it does not know."""
    document = demo_cluster("train01").to_api()
    pools = document["nodePools"]
    spare = {**pools[0], "id": "spare", "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1}}
    pools.append(spare)
    slurm = document["orchestratorSpec"]["slurmSpec"]
    slurm["partitions"] = [
        {"id": "a4", "nodePoolIds": ["a4"], "config": {"MaxTime": "1-00:00:00"}},
        {"id": "small", "nodePoolIds": ["spare"], "futureField": {"kept": True}},
    ]
    slurm.pop("defaultPartitionId", None)  # the first is the default
    return Cluster.model_validate(document)


def test_the_partition_list_is_sent_whole_with_what_the_bot_does_not_model() -> None:
    cluster = two_partitions()
    plan = plan_slurm_layout(cluster, ADD, "both", ("a4", "spare"), PRICES)
    assert plan.kind == "slurm_layout" and plan.cost_before == plan.cost_after
    assert plan.detail.layout.after.default == "a4"
    sent = KIND.apply(cluster, plan).to_api()["orchestratorSpec"]["slurmSpec"]["partitions"]
    assert sent == [
        {"id": "a4", "nodePoolIds": ["a4"], "config": {"MaxTime": "1-00:00:00"}},
        {"id": "small", "nodePoolIds": ["spare"], "futureField": {"kept": True}},
        {"id": "both", "nodePoolIds": ["a4", "spare"]},
    ]
    assert not KIND.applied(plan, cluster) and KIND.applied(plan, KIND.apply(cluster, plan))
    assert KIND.drift(plan, cluster) is None


def test_no_pool_is_left_without_a_partition_and_the_implicit_default_is_kept() -> None:
    cluster = two_partitions()
    with pytest.raises(PlanError, match="would leave pool spare of train01 in no partition"):
        plan_slurm_layout(cluster, REMOVE, "small", (), PRICES)
    with pytest.raises(PlanError, match="'a4' is the default partition"):  # first: implicit
        plan_slurm_layout(cluster, REMOVE, "a4", (), PRICES)
    covered = KIND.apply(cluster, plan_slurm_layout(cluster, ADD, "both", ("spare",), PRICES))
    plan = plan_slurm_layout(covered, REMOVE, "small", (), PRICES)
    assert [p.id for p in KIND.apply(covered, plan).slurm.partitions or []] == [
        "a4",
        "both",
    ]


def test_a_new_login_pool_must_be_fixed_and_the_old_one_is_warned_about() -> None:
    cluster = two_partitions()
    with pytest.raises(PlanError, match="'spare' runs jobs in partition small"):
        plan_slurm_layout(cluster, LOGIN, "spare", (), PRICES)
    document = cluster.to_api()
    document["orchestratorSpec"]["slurmSpec"]["partitions"][1]["nodePoolIds"] = ["a4"]
    document["nodePools"][-1]["scalingSpec"] = {"minNodeCount": 0, "maxNodeCount": 2}
    freed = Cluster.model_validate(document)
    with pytest.raises(PlanError, match="a login pool needs a fixed count of at least 1 node"):
        plan_slurm_layout(freed, LOGIN, "spare", (), PRICES)
    document["nodePools"][-1]["scalingSpec"] = {"minNodeCount": 1, "maxNodeCount": 1}
    fixed = Cluster.model_validate(document)
    plan = plan_slurm_layout(fixed, LOGIN, "spare", (), PRICES)
    assert plan.update_mask == ("orchestrator_spec.slurm_spec.login_node_pool_id",)
    [warning] = plan.warnings
    assert "login stops being the login pool and is in no partition" in warning
    assert KIND.apply(fixed, plan).slurm.login_node_pool_id == "spare"


def test_the_grammar() -> None:
    assert parse("slurm train01 partition add gpu a4,b4") == SlurmLayout(
        "train01", ADD, "gpu", ("a4", "b4")
    )
    assert parse("slurm train01 PARTITION Remove gpu") == SlurmLayout("train01", REMOVE, "gpu")
    assert parse("slurm train01 partition default gpu") == SlurmLayout("train01", DEFAULT, "gpu")
    assert parse("slurm train01 login-pool login2") == SlurmLayout("train01", LOGIN, "login2")
    for bad in ("slurm train01 partition add gpu", "slurm train01 partition add gpu a4 x"):
        with pytest.raises(CommandError, match="use partition add ID"):
            parse(bad)
    with pytest.raises(CommandError, match="is not a node pool id"):
        parse("slurm train01 partition add gpu A4")
