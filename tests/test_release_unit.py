"""A pipeline release on the core with a manual clock and a real SQLite store: what its
checks do while its announcement is still being posted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from handlers.changes.capability import RELEASES
from handlers.policy import Policy
from handlers.replies import Reply
from tests.conftest import ManualClock
from tests.support.fakes import FakeMessenger
from tests.support.text_adapter import text
from tests.test_services_unit import C1, make_bot
from tests.test_store import open_store

CALLER = "build@demo-project.iam.gserviceaccount.com"
POLICY = {
    "roles": {"operator": ["U0ALICE"], "approver": ["U0BOB"]},
    "pipelines": {CALLER: {"pre_approved": ["scale-to-zero"], "ask": ["delete"]}},
}


class HeldMessenger(FakeMessenger):
    """Posts wait at ``gate`` while it is closed: Slack slow to answer chat.postMessage."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = asyncio.Event()

    async def post(
        self, channel: str, reply: Reply, thread: str | None = None, key: str | None = None
    ) -> str:
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        return await super().post(channel, reply, thread, key)


def thread_of(messenger: FakeMessenger, ts: str) -> list[str]:
    return [text(reply) for _, _, reply, thread in messenger.posted if thread == ts]


async def test_a_check_during_the_announcement_waits_for_its_thread(tmp_path: Path) -> None:
    """A check that reads the release between its row and its announcement's ts used to
    move it to drained with nobody told: the thread never heard that the queue was empty."""
    clock, messenger = ManualClock(), HeldMessenger()
    async with open_store("sqlite", tmp_path) as store:
        bot = make_bot(clock, Policy.model_validate(POLICY), releases=store, messenger=messenger)
        bot.activity.queues[C1] = (0, 0)
        releases = bot.services.of(RELEASES)
        assert releases is not None
        messenger.gate.clear()
        starting = asyncio.create_task(releases.start(CALLER, C1, "delete", 3600.0))
        await messenger.waiting.wait()  # stored, its announcement not yet answered
        [stored] = await store.open_releases()
        assert stored.thread is None
        await releases.check_all()
        [still] = await store.open_releases()
        assert still.state == stored.state  # not moved while nobody can be told
        messenger.gate.set()
        release = await starting
        assert release.thread is not None
        await releases.check_all()
        assert any(
            "the Slurm queue is empty" in line for line in thread_of(messenger, release.thread)
        )


async def test_a_release_whose_announcement_failed_goes_on_after_a_minute(
    tmp_path: Path,
) -> None:
    clock, messenger = ManualClock(), FakeMessenger(refuse="channel_not_found")
    async with open_store("sqlite", tmp_path) as store:
        bot = make_bot(clock, Policy.model_validate(POLICY), releases=store, messenger=messenger)
        bot.activity.queues[C1] = (0, 0)
        releases = bot.services.of(RELEASES)
        assert releases is not None
        release = await releases.start(CALLER, C1, "delete", 3600.0)
        assert release.thread is None  # Slack refused the announcement
        await releases.check_all()
        [waiting] = await store.open_releases()
        assert waiting.state == release.state
        clock.advance(61)
        await releases.check_all()
        [drained] = await store.open_releases()
        assert drained.state != release.state  # the queue's emptiness is seen all the same
