"""The requester hears how their request ended: a thread reply that mentions them (an edit
notifies nobody), posted once, for each way a request can end."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from handlers.changes.ledger import told_key
from tests.support.demo_stack import demo_stack, ends_and_mentions, thread_of


async def test_each_ending_mentions_the_requester_once(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, expiry_seconds=0.1) as stack:
        endings = {}
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("bob", card["ts"], "reject")
        endings["was rejected by <@U0BOB>"] = card
        card = await stack.card("alice", "/cluster resize eval01 h100 1")
        await stack.click("alice", card["ts"], "withdraw")
        endings["was withdrawn"] = card
        card = await stack.card("alice", "/cluster resize cpu01 cpu 2")
        await stack.click("bob", card["ts"], "approve")
        endings["is done: finished in"] = card
        for words, card in endings.items():
            messages = await stack.wait(
                lambda ms, card=card, words=words: any(
                    words in t for t in ends_and_mentions(thread_of(ms, card))[1]
                ),
                limit=30,
            )
            [mention] = ends_and_mentions(thread_of(messages, card))[1]
            assert mention.count("<@U0ALICE> your request r-") == 1, mention
        store = stack.service.store

        async def all_told() -> list[object]:
            told = await store.requests_in(["rejected", "withdrawn", "succeeded"])
            return told if len(told) == 3 and all(r.mention_message for r in told) else []

        assert await stack.wait_for(all_told)  # each reply's ts is kept
        # once told, a repeat of the steps after the end (a recovery) tells no one again
        engine = stack.service.core.engine
        for request in await stack.service.store.requests_in(["rejected", "withdrawn"]):
            key = told_key(request.id)
            await store.release_owed(engine.owner)
            async with store.engine.begin() as connection:  # owed again, as after a crash
                await connection.execute(
                    sa.text("UPDATE owed SET state = 'due' WHERE key = :key"), {"key": key}
                )
            await engine.run(key)  # here, unless the tick found it due first

            async def done_again(key: str = key) -> bool:
                item = await store.get_owed(key)
                return item is not None and str(item.state) != "due" and key not in engine.running

            assert await stack.wait_for(done_again)
        messages = await stack.messages()
        for card in endings.values():
            assert len(ends_and_mentions(thread_of(messages, card))[1]) == 1


async def test_an_expired_request_mentions_its_requester(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, expiry_seconds=0.1) as stack:
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        store = stack.service.store
        # the card is posted while the request is a draft, and under load the expiry job (due
        # 0.1 s after) may have run before this looks: wait until it is pending or expired
        [request] = await stack.wait_for(lambda: store.requests_in(["pending", "expired"]))
        await store.update_request(request.id, expires_at=0.0)
        messages = await stack.wait(
            lambda ms: any("expired" in t for t in ends_and_mentions(thread_of(ms, card))[1]),
            limit=20,
        )
        [mention] = ends_and_mentions(thread_of(messages, card))[1]
        assert "<@U0ALICE> your request" in mention and "nobody approved it in time" in mention
