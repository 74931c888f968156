"""Two `clusterbot serve` replicas on one PostgreSQL database, behind `clusterbot sandbox`
spreading Slack's deliveries over both as a load balancer would: they act as one bot."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.demo_stack import ends_and_mentions, text_of
from tests.support.postgres import fresh_database, query
from tests.support.processes import Replica, Sandbox, replica, sandbox, wait_until

pytestmark = pytest.mark.postgres

FAST_IDLE = "\n[idle]\nidle_after_minutes = 0.01\ncooldown_hours = 24\n"


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Sandbox, str, Replica, Replica]]:
    with sandbox(tmp_path) as box, fresh_database() as url:
        box.simulator("config", {"durations": {"update": 6}})
        one = replica(tmp_path, box, "one", url, CLUSTERBOT_SWEEP_INTERVAL="2")
        two = replica(tmp_path, box, "two", url, CLUSTERBOT_SWEEP_INTERVAL="2")
        policy = Path(one.env["CLUSTERBOT_POLICY_FILE"])
        policy.write_text(policy.read_text() + FAST_IDLE)
        box.point_at(one.events, two.events)
        try:
            one.start()
            two.start()
            yield box, url, one, two
        finally:
            one.stop()
            two.stop()


def acks(server: Replica) -> float:
    """Requests the replica answered on /slack/events, from its /metrics."""
    import urllib.request

    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    line = next(x for x in text.splitlines() if x.startswith("clusterbot_ack_seconds_count"))
    return float(line.split()[-1])


async def clicks(box: Sandbox, ts: str, count: int) -> list[dict[str, Any]]:
    body = {"user": "bob", "channel": "ml-infra", "ts": ts, "action_id": "approve"}
    async with aiohttp.ClientSession() as session:

        async def one() -> dict[str, Any]:
            async with session.post(f"{box.url}/sandbox/api/click", json=body) as reply:
                return dict(await reply.json())

        return list(await asyncio.gather(*(one() for _ in range(count))))


def test_two_replicas_act_as_one_bot(pair: tuple[Sandbox, str, Replica, Replica]) -> None:
    box, url, one, two = pair
    # the idle alert for cpu01: both replicas sweep every 2 s, one of them per interval
    alert = wait_until(
        lambda: [m for m in box.messages() if "Idle cluster: cpu01" in text_of(m)],
        limit=40,
        what="the idle alert",
    )
    latest = "SELECT at FROM sweep_reports WHERE name = 'latest'"  # the others: other reports
    first_report = query(url, latest)[0][0]
    wait_until(
        lambda: query(url, latest)[0][0] > first_report + 4,
        limit=30,
        what="two more sweeps",
    )
    alerts = [m for m in box.messages() if "Idle cluster: cpu01" in text_of(m)]
    assert len(alerts) == 1 == len(alert)
    # each cluster's drained node is one health episode, with one alert, whoever swept
    for cluster in ("train01", "cpu01"):
        health = [m for m in box.messages() if m["text"].startswith(f"Health: {cluster}")]
        assert len(health) == 1, (cluster, [m["text"] for m in health])
    owners = {row[0] for row in query(url, "SELECT owner FROM leases")}
    assert owners <= {None, "one", "two"}

    # 200 concurrent clicks on Approve, spread over both replicas: one PATCH
    assert box.command("alice", "/cluster resize train01 a4 3")["status"] == 200
    card = box.card("Resize request: train01")
    acks_before = [acks(r) for r in (one, two)]
    answers = asyncio.run(clicks(box, card["ts"], 200))
    delivered = [a for a in answers if a.get("status") == 200]
    # once the card lost its buttons, later clicks find none (as in Slack's client)
    assert all(a.get("status") == 200 or a.get("error") == "no_such_button" for a in answers)
    assert len(delivered) >= 50
    assert all(acks(r) - before >= 10 for r, before in zip((one, two), acks_before, strict=True))
    wait_until(lambda: len(box.thread(card["ts"])) == 1, what="the thread message")
    # the thread message comes first, then the re-read, then the PATCH
    wait_until(lambda: box.requests("PATCH"), what="the PATCH")
    assert len(box.requests("PATCH")) == 1
    [(owner,)] = query(url, "SELECT owner FROM approval_requests")
    assert owner in ("one", "two")

    # the replica that approved it dies mid-operation; the other finishes it, once
    follower = one if owner == "one" else two
    assert follower.process is not None
    follower.process.send_signal(signal.SIGKILL)
    follower.wait_exit()
    box.point_at((two if follower is one else one).events)
    wait_until(
        lambda: (
            query(url, "SELECT final FROM tracked_operations") == [("posted",)]
            and query(url, "SELECT state FROM owed WHERE kind = 'told'") == [("done",)]
        ),
        limit=60,
        what="the end of the operation, told",
    )
    thread, mentions = ends_and_mentions(box.thread(card["ts"]))
    assert len(thread) == 1 and "done, finished in" in thread[0]
    assert len(mentions) == 1
    assert len(box.requests("PATCH")) == 1
    assert query(url, "SELECT state FROM approval_requests") == [("succeeded",)]
