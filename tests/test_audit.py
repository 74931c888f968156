"""``/cluster audit``: people by mention, the change in words, outcome and duration, filters
by cluster, person and time, and Older pages through the stand-ins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.slack.people import SLACK_PEOPLE
from handlers.actions import AuditPage
from handlers.entities import AuditEntry
from handlers.grammar import CommandError
from handlers.reading.audit import Audit, AuditLog, parse_audit
from handlers.replies import Button, Buttons, Text, plain
from tests.support.demo_stack import demo_stack, text_of, thread_of
from tests.support.memory import MemoryStore

TRAIN01_NAME = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"


async def test_the_log_says_who_changed_what_and_how_it_ended(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("bob", card["ts"], "approve")
        await stack.wait(lambda ms: any("done, finished" in t for t in thread_of(ms, card)), 20)
        card = await stack.card("alice", "/cluster slurm train01 set PreemptMode=REQUEUE")
        await stack.click("bob", card["ts"], "reject")
        await stack.wait(
            lambda ms: any("rejected" in text_of(m) for m in ms if m["ts"] == card["ts"])
        )

        log = text_of(await stack.reply_to("carol", "/cluster audit train01"))
        assert "<@U0ALICE> asked for train01: a4: 2 → 3 nodes" in log, log
        assert "<@U0BOB> approved train01" in log
        assert "— done: train01: a4: 2 → 3 nodes · finished in" in log and "· took " in log
        assert "operation_started" not in log and " started train01" in log
        assert "<@U0BOB> rejected train01: set PreemptMode = REQUEUE" in log
        assert log.index("rejected") < log.index("— done:")  # newest first

        mine = text_of(await stack.reply_to("carol", "/cluster audit by @bob"))
        assert "<@U0ALICE> asked for" not in mine and "<@U0BOB> approved" in mine
        assert "No entries." in text_of(await stack.reply_to("carol", "/cluster audit cpu01"))
        recent = text_of(await stack.reply_to("carol", "/cluster audit since 1h"))
        assert "approved train01" in recent


async def test_older_pages_through_in_place(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        for n in range(20):
            await stack.service.core.ledger.record("U0ALICE", f"step{n:02d}", "c/cpu01", None)
        first = await stack.reply_to("carol", "/cluster audit")
        assert "step19" in text_of(first) and "step05" in text_of(first)
        assert "step04" not in text_of(first)
        await stack.click("carol", first["ts"], "audit_older")
        older = await stack.wait(
            lambda ms: any(m["ts"] == first["ts"] and "step04" in text_of(m) for m in ms)
        )
        page = text_of(next(m for m in older if m["ts"] == first["ts"]))
        assert "step00" in page and "step05" not in page and "Older" not in page


async def test_a_page_ends_where_the_next_begins() -> None:
    store = MemoryStore()
    for n in range(31):
        await store.audit(AuditEntry(at=1000.0 + n, actor="U0ALICE", action=f"a{n}", cluster="x"))
    log = AuditLog(store)
    seen: list[str] = []
    before = None
    while True:
        reply = await log.page(Audit(before=before), 5000.0)
        lines = [plain(p.spans) for p in reply.parts if isinstance(p, Text)]
        seen += [line.split()[4] for line in lines if line.endswith(" x")]
        buttons = [b for p in reply.parts if isinstance(p, Buttons) for b in p.buttons]
        older = [
            b.action
            for b in buttons
            if isinstance(b, Button) and isinstance(b.action, AuditPage) and not b.action.csv
        ]
        if not older:
            break
        before = older[0].before
    assert seen == [f"a{n}" for n in range(30, -1, -1)]  # each once, newest first


@pytest.mark.parametrize(
    ("words", "query"),
    [
        ([], Audit()),
        (["TRAIN01"], Audit("train01")),
        (["by", "U0BOB"], Audit(by="U0BOB")),
        (
            ["train01", "by", "<@U0BOB|bob>", "since", "7d"],
            Audit("train01", "<@U0BOB|bob>", 604800),
        ),
        (["since", "12h"], Audit(since=12 * 3600)),
    ],
)
def test_the_words_of_audit(words: list[str], query: Audit) -> None:
    assert parse_audit(words) == query


@pytest.mark.parametrize(
    ("words", "reason"),
    [
        (["by"], "use by USER or since 7d"),
        (["since", "forever"], "is not a time back such as 7d"),
        (["train01", "lately"], "audit takes 'lately'"),
    ],
)
def test_bad_audit_words(words: list[str], reason: str) -> None:
    with pytest.raises(CommandError, match=re.escape(reason)):
        parse_audit(words)


def test_who_a_word_names_is_slack_s_to_say() -> None:
    """Slack escapes a mention in a command's text as <@U…|name>; an id may be typed bare."""
    assert SLACK_PEOPLE.named("<@U0BOB|bob>") == "U0BOB" == SLACK_PEOPLE.named("U0BOB")
    assert SLACK_PEOPLE.named("<@W0ENTERPRISE>") == "W0ENTERPRISE"
    assert SLACK_PEOPLE.named("@bob") is None and SLACK_PEOPLE.named("S0GROUP") is None
    assert SLACK_PEOPLE.is_group("S0APPROVERS") and not SLACK_PEOPLE.is_group("U0BOB")
    assert not SLACK_PEOPLE.is_person("ci@p.iam.gserviceaccount.com")


async def test_a_word_that_names_nobody_is_refused_with_the_usage(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        said = text_of(await stack.reply_to("alice", "/cluster audit by nobody"))
    assert "'nobody' is not a person: mention them (@name) or give their user id" in said
    assert "/cluster audit" in said  # the usage line


async def test_the_log_is_shared_as_a_csv_file(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("bob", card["ts"], "reject")
        await stack.wait(lambda ms: any("your request" in t for t in thread_of(ms, card)))
        log = await stack.reply_to("carol", "/cluster audit train01")
        await stack.click("carol", log["ts"], "audit_csv")

        def shared(messages: list[dict[str, object]]) -> list[dict[str, object]]:
            return [m for m in messages if m.get("files")]

        [message] = shared(await stack.wait(shared))
        assert "Audit log, 2 entries, asked by <@U0CAROL>" in str(message["text"])
        [file] = message["files"]  # type: ignore[misc]
        assert file["name"].startswith("audit-train01-") and file["name"].endswith(".csv")
        headers = {"Authorization": f"Bearer {stack.workspace.bot_token}"}
        async with stack.session.get(file["url_private"], headers=headers) as reply:
            rows = (await reply.text()).splitlines()
        assert rows[0] == "time_utc,actor,action,cluster,request,change,outcome,took_s"
        assert ",U0BOB,rejected," in rows[1] and "a4: 2 → 3 nodes" in rows[1]
        assert ",U0ALICE,requested," in rows[2]


def test_every_action_the_log_stores_reads_as_words() -> None:
    from handlers.entities import RequestState
    from handlers.reading.audit import ACTION_WORDS, action_words

    stored = {"requested", "approved", "approval_refused", "operation_started"}
    stored |= {str(s) for s in RequestState if not s.open}
    assert stored <= set(ACTION_WORDS), stored - set(ACTION_WORDS)
    for action in stored:
        assert "_" not in action_words(action)
    assert action_words("withdrawn") == "withdrew"


async def test_only_the_entry_that_ended_a_request_says_how_long_it_took(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("alice", card["ts"], "withdraw")
        await stack.wait(
            lambda ms: any("Withdrawn" in text_of(m) for m in ms if m["ts"] == card["ts"])
        )

        async def both_written() -> bool:  # the ask is audited after its card is pending
            actions = {e.action for e in await stack.service.store.audit_log()}
            return {"requested", "withdrawn"} <= actions

        await stack.wait_for(both_written)
        log = text_of(await stack.reply_to("carol", "/cluster audit train01"))
        [withdrew] = [line for line in log.splitlines() if " withdrew " in line]
        [asked] = [line for line in log.splitlines() if " asked for " in line]
        assert "· took " in withdrew and "took" not in asked


async def test_an_ask_is_dated_when_it_was_made_even_when_written_after_a_click() -> None:
    """The card exists before its ask is written: a reject clicked at once can be audited
    first, and the log still shows the ask before it."""
    from handlers.changes.ledger import RequestLedger
    from handlers.changes.plan import ChangePlan
    from handlers.changes.resize import ResizeDetail
    from handlers.entities import ApprovalRequest
    from tests.support.fakes import FakeMessenger
    from tests.support.text_adapter import TextPeople

    now = [1000.0]
    store = MemoryStore()
    from handlers.owed.engine import Engine

    clock = lambda: now[0]  # noqa: E731
    ledger = RequestLedger(
        store=store,
        messenger=FakeMessenger(),
        clock=clock,
        people=TextPeople(),
        engine=Engine(store=store, clock=clock, owner="me"),
    )
    plan = ChangePlan(cluster=TRAIN01_NAME, detail=ResizeDetail(), fingerprint="f")
    request = ApprovalRequest(
        id="r-1", plan=plan, requester="U0ALICE", channel="C1", created_at=1000.0, expires_at=2e3
    )
    now[0] = 1000.4  # bob's reject lands, and is audited, before the ask's line runs
    await ledger.audit("U0BOB", "rejected", request)
    await ledger.asked(request)
    entries = await store.audit_log(TRAIN01_NAME)
    assert [(e.action, e.at) for e in entries] == [("rejected", 1000.4), ("requested", 1000.0)]
