"""Health through the sweep, on the core: the sweep reads every running cluster's Slurm nodes
and jobs, keeps each cluster's health in its report, and /cluster health answers from it at
once, with what the broken nodes cost while broken."""

from __future__ import annotations

from handlers.domain.operations import SlurmJob, SlurmNode
from handlers.policy import Policy
from tests.conftest import ManualClock
from tests.support.text_adapter import text
from tests.test_services_unit import C1, POLICY, make_bot

H = 3600.0


class BrokenSlurm:
    """c1's Slurm with one node drained by a failed GPU and a job that waits on it."""

    def __init__(self, now: float) -> None:
        self.now = now

    async def jobs(self, cluster: str) -> list[SlurmJob]:
        return [
            SlurmJob(
                job_id=4102,
                name="eval",
                user="bob",
                account="eval",
                partition="gpu",
                states=frozenset({"PENDING"}),
                reason="ReqNodeNotAvail",
                priority=1,
                qos="normal",
                node_count=2,
                nodes="",
                submitted=int(self.now - 3 * H),
                started=None,
                reason_text="ReqNodeNotAvail, UnavailableNodes:c1-gpu-1",
            )
        ]

    async def nodes(self, cluster: str) -> list[SlurmNode]:
        return [
            SlurmNode("c1-gpu-0", frozenset({"IDLE"}), "", ("gpu",)),
            SlurmNode(
                "c1-gpu-1",
                frozenset({"IDLE", "DRAIN"}),
                "Xid 79: GPU has fallen off the bus",
                ("gpu",),
                reason_by="root",
                reason_at=self.now - 5 * H,
            ),
        ]

    async def shares(self, cluster: str) -> list[object]:
        return []


async def test_a_sweep_keeps_each_clusters_health_and_health_answers_from_it(
    clock: ManualClock,
) -> None:
    clock.now = 1_795_424_400.0
    bot = make_bot(clock, Policy.model_validate(POLICY), activity=BrokenSlurm(clock.now))  # type: ignore[arg-type]
    before = text(await bot.ask("U0CAROL", "health"))
    assert "No sweep has finished yet" in before and "[Sweep now](health_sweep_now)" in before
    await bot.services.sweeper.sweep(force=True)
    shown = text(await bot.ask("U0CAROL", "health c1"))
    price = bot.services.approvals.prices.node_hour(bot.plane.clusters[C1].node_pools[0])
    assert price is not None
    assert (
        f"*c1* (`demo-project/us-central1`): 1 node out of service, ~${price:,.2f}/h while broken"
        in shown
    )
    assert "c1-gpu-1  drained  Xid 79: GPU has fallen off the bus  root" in shown
    said = "Job 4102 (bob, gpu) has waited 3 h on c1-gpu-1; Slurm says: ReqNodeNotAvail, "
    assert said + "UnavailableNodes:c1-gpu-1." in shown
    clicked = await bot.click("U0CAROL", "health_sweep_now", "sweep")
    assert clicked is not None and "c1-gpu-1" in text(clicked)


async def test_a_healthy_fleet_says_so(clock: ManualClock) -> None:
    bot = make_bot(clock, Policy.model_validate(POLICY))
    bot.activity.queues[C1] = (1, 0)  # type: ignore[attr-defined]
    await bot.services.sweeper.sweep(force=True)
    shown = text(await bot.ask("U0CAROL", "health"))
    assert "Healthy: no node out of service" in shown and "in 1 cluster read" in shown
