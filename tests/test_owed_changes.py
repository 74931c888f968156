"""An approved change is owed from the moment it is approved, and done by the engine whatever
happens next, with no restart: the database gone just after the approval or in the middle of
sending, a Slurm proxy that refuses one call in three. Each test counts what reached the
world: one PATCH, one node update."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from handlers.changes.execution import GIVE_UP, LOOK_RETRY, change_key
from handlers.domain.errors import SlurmUnreadableError
from handlers.domain.operations import SlurmNode
from handlers.entities import RequestState
from handlers.owed.engine import LEASE
from handlers.owed.model import OwedState
from handlers.policy import Policy, Role
from tests.conftest import ManualClock
from tests.support.memory import MemoryStore
from tests.test_health_alerts import Slurm
from tests.test_services_unit import C1, POLICY, Bot, make_bot


def goes_down_at(point: str, store: MemoryStore) -> object:
    """A crash hook that takes the database away at a named step (the process lives on)."""

    def hook(step: str) -> None:
        if step == point:
            store.down = True

    return hook


def bot_losing_the_database_at(point: str, clock: ManualClock) -> Bot:
    policy = Policy.model_validate(POLICY)
    bot = make_bot(clock, policy)
    bot.services.engine.crash = goes_down_at(point, bot.store)  # type: ignore[assignment]
    bot.services.approvals.crash = bot.services.engine.crash  # type: ignore[assignment]
    return bot


async def test_the_database_gone_just_after_an_approval_strands_nothing(
    clock: ManualClock,
) -> None:
    bot = bot_losing_the_database_at("after-approval", clock)
    assert await bot.ask("U0ALICE", "resize c1 gpu 3") is None  # a card
    request = await bot.only_request()
    with contextlib.suppress(ConnectionError):  # the click's answer fails with the database
        await bot.services.approvals.decide("U0BOB", Role.APPROVER, request.id, approve=True)
    assert bot.plane.patches == []
    clock.advance(5)
    bot.store.down = False  # back after 5 s; the same replica goes on, never restarted
    await bot.services.engine.run_due()
    assert len(bot.plane.patches) == 1
    following = await bot.store.get_request(request.id)
    assert following is not None and following.state == RequestState.RUNNING
    owed = await bot.store.get_owed(change_key(request.id))
    assert owed is not None and owed.state == OwedState.DONE


async def test_the_database_gone_while_sending_hands_the_change_on_after_its_lease(
    clock: ManualClock,
) -> None:
    bot = bot_losing_the_database_at("after-reread", clock)
    assert await bot.ask("U0ALICE", "resize c1 gpu 3") is None
    request = await bot.only_request()
    with contextlib.suppress(ConnectionError):
        await bot.services.approvals.decide("U0BOB", Role.APPROVER, request.id, approve=True)
    assert bot.plane.patches == []  # "executing" could not be written: nothing was sent
    bot.store.down = False
    bot.services.engine.crash = lambda step: None  # type: ignore[assignment]
    # the worker failed and could not say so: its lease is not renewed by the heartbeat
    await bot.services.engine.renew()
    assert await bot.services.engine.run_due() == 0  # leased still, for a while
    clock.advance(LEASE + 1)
    assert await bot.services.engine.run_due() == 1
    assert len(bot.plane.patches) == 1
    done = await bot.store.get_request(request.id)
    assert done is not None and done.state == RequestState.RUNNING


@dataclass
class FlakySlurm(Slurm):
    """A Slurm proxy that fails one call in three (HTTP 503 from the control plane), before
    or after slurmctld applied an update."""

    rng: random.Random = field(default_factory=lambda: random.Random(7))
    failures: int = 0

    def _flaky(self) -> None:
        if self.rng.random() < 0.34:
            self.failures += 1
            raise SlurmUnreadableError("Slurm could not be reached: the service is unavailable")

    async def nodes(self, cluster: str) -> list[SlurmNode]:
        self._flaky()
        return await super().nodes(cluster)

    async def update_node(
        self, cluster: str, node: str, states: Sequence[str], reason: str | None = None
    ) -> None:
        self._flaky()  # refused before it reached slurmctld
        await super().update_node(cluster, node, states, reason)
        self._flaky()  # applied, its reply lost


async def test_a_resume_through_a_flaky_proxy_is_applied_once_and_ends_succeeded(
    clock: ManualClock,
) -> None:
    failures = 0
    for seed in range(5):
        slurm = FlakySlurm(rng=random.Random(seed))
        slurm.fail("c1-gpu-1", "DRAIN")
        policy = Policy.model_validate(POLICY)
        bot = make_bot(clock, policy, activity=slurm, nodes=slurm)  # type: ignore[arg-type]
        request = None
        while request is None:  # asking reads the node too; a refusal there is said at once
            reply = await bot.click("U0ALICE", "health_resume", f"{C1}|c1-gpu-1")
            request = next(iter(bot.store.requests.values()), None)
            assert request is not None or reply is not None
        await bot.click("U0BOB", "approve", request.id)
        waited = 0.0
        while (await bot.store.get_request(request.id)).state in (  # type: ignore[union-attr]
            RequestState.APPROVED,
            RequestState.EXECUTING,
        ):
            assert waited < GIVE_UP, "looked at for longer than it may be"
            clock.advance(LOOK_RETRY)
            waited += LOOK_RETRY
            await bot.services.engine.run_due()
        done = await bot.store.get_request(request.id)
        assert done is not None and done.state == RequestState.SUCCEEDED, (seed, done.outcome)
        # one RESUME reached slurmctld, whatever the proxy lost on the way
        assert slurm.updates == [("c1-gpu-1", ("RESUME",), None)], seed
        assert slurm.states["c1-gpu-1"] == {"IDLE"}
        failures += slurm.failures
    assert failures >= 5  # the proxy did fail along the way
