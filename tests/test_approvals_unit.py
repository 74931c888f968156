"""The change service against a real store and the simulator, with a messenger that can be
told to refuse: a request is kept only once its card exists."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store import Store
from bot.vertex.client import VertexClient
from handlers.changes.approvals import Approvals
from handlers.changes.commands import Resize
from handlers.changes.execution import Executor
from handlers.changes.ledger import RequestLedger
from handlers.changes.preapproved import Cards
from handlers.changes.resize import plan_resize
from handlers.changes.tracking import POLLS_AT_ONCE, Tracker
from handlers.costs import PriceBook
from handlers.domain.names import Target
from handlers.entities import ApprovalRequest, RequestState
from handlers.grammar import CommandError
from handlers.owed.engine import Engine, Room
from handlers.policy import Policy
from handlers.reading.clusters import ClusterDirectory
from tests.conftest import ManualClock
from tests.support.fakes import FakeMessenger
from tests.support.text_adapter import TextPeople, text


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}")
    await store.migrate()
    yield store
    await store.close()


def service(
    store: Store, client: VertexClient, clock: ManualClock, messenger: FakeMessenger
) -> Approvals:
    engine = Engine(store=store, clock=clock, owner="me")
    ledger = RequestLedger(
        store=store, messenger=messenger, clock=clock, people=TextPeople(), engine=engine
    )
    engine.add(Executor(store=store, vertex=client, ledger=ledger, clock=clock))
    directory = ClusterDirectory(client, [Target("demo-project", "us-central1")])
    approvals = Approvals(
        store=store,
        directory=directory,
        policy=Policy(),
        prices=PriceBook.with_overrides(),
        messenger=messenger,
        ledger=ledger,
        engine=engine,
        clock=clock,
        owner="me",
    )
    engine.add(Cards(approvals, alert_channel=None))
    tracker = Tracker(
        store=store, requests=store, vertex=client, messenger=messenger, ledger=ledger, clock=clock
    )
    engine.add(tracker, room=Room(POLLS_AT_ONCE))
    return approvals


@pytest.mark.parametrize("refusal", ["not_in_channel", "channel_not_found"])
async def test_a_card_that_cannot_be_posted_leaves_nothing_pending(
    store: Store, client: VertexClient, clock: ManualClock, refusal: str
) -> None:
    messenger = FakeMessenger(refuse=refusal)
    changes = service(store, client, clock, messenger)
    with pytest.raises(CommandError) as caught:
        await changes.request_change("U0ALICE", "C0X", Resize("train01", "a4", 3, 3))
    assert refusal in caught.value.reason
    assert "othing was requested" in caught.value.reason  # said either way, never a trace
    assert (
        await store.open_requests(
            "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"
        )
        == []
    )
    messenger.refuse = None  # the cluster is not blocked: asked again, it gets its card
    request = await changes.request_change("U0ALICE", "C0X", Resize("train01", "a4", 3, 3))
    assert request.state == RequestState.PENDING and request.card_message


async def test_a_card_slack_rate_limits_is_kept_owed_and_posted_once_the_limit_passes(
    store: Store, client: VertexClient, clock: ManualClock
) -> None:
    messenger = FakeMessenger(refuse="ratelimited")
    changes = service(store, client, clock, messenger)
    request = await changes.request_change("U0ALICE", "C0X", Resize("train01", "a4", 3, 3))
    assert request.state == RequestState.DRAFT and request.card_message is None
    told = await changes.card_pending(request)
    assert told is not None and "rate limited" in text(told), told
    messenger.refuse = None
    assert await changes.engine.run_due() == 0  # not before Slack's limit has passed
    clock.advance(61)
    assert await changes.engine.run_due() == 1
    posted = await store.get_request(request.id)
    assert posted is not None and posted.state == RequestState.PENDING and posted.card_message
    assert len(messenger.posted) == 1 and await changes.card_pending(posted) is None


async def test_a_draft_with_no_card_owed_is_abandoned_and_frees_the_cluster(
    store: Store, client: VertexClient, clock: ManualClock
) -> None:
    """A draft an older release left (its card was never owed): ended after its minute."""
    messenger = FakeMessenger()
    changes = service(store, client, clock, messenger)
    cluster = await client.get_cluster(
        "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"
    )
    plan = plan_resize(cluster, "a4", 3, 3, PriceBook.with_overrides())
    draft = ApprovalRequest(
        id="r-crashed",
        plan=plan,
        requester="U0ALICE",
        channel="C0X",
        created_at=clock(),
        expires_at=clock() + 3600,
        state=RequestState.DRAFT,
    )
    await store.add_request(draft)  # the process died before its card was confirmed
    with pytest.raises(CommandError):
        await changes.request_change("U0ALICE", "C0X", Resize("train01", "a4", 3, 3))
    clock.advance(61)
    assert await changes.expire_due() == 1
    loaded = await store.get_request("r-crashed")
    assert loaded is not None and loaded.state == RequestState.ABANDONED
    assert (
        await changes.request_change("U0ALICE", "C0X", Resize("train01", "a4", 3, 3))
    ).card_message


async def test_user_groups_are_read_on_a_freshly_booted_machine() -> None:
    """time.monotonic() counts from boot: at 0 the group cache must still count as stale."""
    from bot.slack.messenger import web_client
    from bot.slack.roles import Roles
    from handlers.policy import Role
    from tests.support.slack_stack import TOKEN, slack_stack

    policy = Policy.model_validate({"roles": {"approver": ["S0APPROVERS"]}})
    now = [0.0]
    async with slack_stack(with_bot=False) as stack:
        stack.workspace.scopes.add("usergroups:read")  # the manifest's optional scope
        roles = Roles(policy, web_client(TOKEN, stack.api_url), clock=lambda: now[0])
        assert await roles.of("U0BOB") == Role.APPROVER  # read at once, not "fresh and empty"
        stack.workspace.groups["S0APPROVERS"] = ["U0CAROL"]
        now[0] = 100.0
        assert await roles.of("U0CAROL") == Role.VIEWER  # cached for five minutes
        now[0] = 401.0
        assert await roles.of("U0CAROL") == Role.APPROVER  # then read again
