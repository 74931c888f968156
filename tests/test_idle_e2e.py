"""Idle alerts end to end: the sweep finds cpu01, the alert appears, every button works."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.store import IdleRecords
from handlers.policy import Policy
from tests.support.demo_stack import CPU01, Stack, demo_stack, text_of, thread_of

FAST_IDLE = {"idle_after_minutes": 0.005, "cooldown_hours": 1}  # idle after 0.3 s


def policy(**idle: Any) -> Policy:
    return Policy.model_validate(
        {
            "roles": {"operator": ["U0ALICE"], "approver": ["U0BOB"], "viewer": ["U0CAROL"]},
            "idle": {**FAST_IDLE, **idle},
        }
    )


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path, policy=policy(), sweep_interval=0.3) as running:
        yield running


def is_reminded(messages: list[dict[str, Any]], alert: dict[str, Any], times: int = 1) -> bool:
    """The alert has ``times`` reminders in its thread and shows its remedies again."""
    again = [m for m in messages if m["thread_ts"] == alert["ts"] and "Still idle" in text_of(m)]
    shown = next(m for m in messages if m["ts"] == alert["ts"])
    return len(again) == times and "Scale to zero" in text_of(shown) and "Keep" in text_of(shown)


def is_alert(message: dict[str, Any]) -> bool:
    blocks = message.get("blocks") or []
    return bool(blocks) and "Idle cluster" in blocks[0].get("text", {}).get("text", "")


async def the_alert(stack: Stack, cluster: str = "cpu01") -> dict[str, Any]:
    messages = await stack.wait(
        lambda ms: any(is_alert(m) and f"Idle cluster: {cluster}" in text_of(m) for m in ms)
    )
    return next(m for m in messages if is_alert(m) and f"Idle cluster: {cluster}" in text_of(m))


async def current(stack: Stack, ts: str) -> dict[str, Any]:
    return next(m for m in await stack.messages() if m["ts"] == ts)


async def fresh_report(stack: Stack, user: str = "carol") -> dict[str, Any]:
    """`/cluster idle` answers from the last sweep at once; its "Sweep now" button replaces
    it with a report of a sweep made after the click."""
    report = await stack.reply_to(user, "/cluster idle")
    assert "Sweep now" in text_of(report)
    await stack.click(user, report["ts"], "idle_sweep_now")
    messages = await stack.wait(
        lambda ms: any(m["ts"] == report["ts"] and m["edited"] for m in ms), limit=20
    )
    replaced = next(m for m in messages if m["ts"] == report["ts"])
    assert replaced["ephemeral_to"] == f"U0{user.upper()}"
    assert "Sweep now" in text_of(replaced) and "From the sweep" in text_of(replaced)
    return replaced


async def test_alert_for_the_idle_cluster_only(stack: Stack) -> None:
    alert = await the_alert(stack)
    text = text_of(alert)
    assert alert["ephemeral_to"] is None
    for fact in (
        "cpu: 4 x n2-standard-8",
        "~$1.55/h",
        "Spent idle so far",
        "Recommendation",
        "demo-project/us-central1",
    ):
        assert fact in text, fact
    ids = [e["action_id"] for b in alert["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert ids == ["idle_scale_to_zero", "idle_delete", "idle_keep", "idle_snooze"]
    await stack.wait(lambda ms: len(stack.simulator.requests) > 0)
    alerts = [m for m in await stack.messages() if is_alert(m)]
    assert len(alerts) == 1  # train01 has jobs; eval01 has no compute nodes


async def test_the_alert_is_kept_current_while_its_period_lasts(stack: Stack) -> None:
    alert = await the_alert(stack)
    first = text_of(alert)

    def grown(ms: list[dict[str, Any]]) -> bool:
        now = next(m for m in ms if m["ts"] == alert["ts"])
        return bool(now["edited"]) and text_of(now) != first and "Scale to zero" in text_of(now)

    messages = await stack.wait(grown)
    assert [m["ts"] for m in messages if is_alert(m)] == [alert["ts"]]  # edited, not posted
    record, _ = await IdleRecords(stack.service.store).get(CPU01)
    assert record.alert_open and record.alert is not None


async def test_scale_to_zero_by_an_approver_patches(stack: Stack) -> None:
    alert = await the_alert(stack)
    await stack.click("bob", alert["ts"], "idle_scale_to_zero")
    messages = await stack.wait(
        lambda ms: any("done, finished in" in text_of(m) for m in ms), limit=20
    )
    patches = await stack.requests("PATCH")
    assert len(patches) == 1 and patches[0]["query"] == {"updateMask": "node_pools"}
    pools = {p["id"]: p["scalingSpec"] for p in stack.simulator.clusters[CPU01]["nodePools"]}
    assert pools == {
        "cpu": {"minNodeCount": 0, "maxNodeCount": 0},
        "login": {"minNodeCount": 1, "maxNodeCount": 1},
    }
    cards = [m for m in messages if "Resize request: cpu01" in text_of(m)]
    assert len(cards) == 1
    # the alert is edited in place: answered, then scaled to zero once the sweep sees it
    edited = await stack.wait(
        lambda ms: any(m["ts"] == alert["ts"] and "Scaled to zero" in text_of(m) for m in ms)
    )
    final = next(m for m in edited if m["ts"] == alert["ts"])
    assert not any(b["type"] == "actions" for b in final["blocks"])
    audit = text_of(await stack.reply_to("carol", "/cluster audit cpu01"))
    assert "approved" in audit and "U0BOB" in audit


async def test_scale_to_zero_by_an_operator_needs_an_approver(stack: Stack) -> None:
    alert = await the_alert(stack)
    await stack.click("alice", alert["ts"], "idle_scale_to_zero")
    messages = await stack.wait(lambda ms: any("Resize request: cpu01" in text_of(m) for m in ms))
    card = next(m for m in messages if "Resize request: cpu01" in text_of(m))
    assert any(b["type"] == "actions" for b in card["blocks"])  # waiting for an approver
    assert await stack.requests("PATCH") == []
    await stack.click("bob", card["ts"], "approve")
    await stack.wait(lambda ms: any("done, finished in" in text_of(m) for m in ms), limit=20)
    assert len(await stack.requests("PATCH")) == 1


async def test_delete_from_the_alert_needs_a_second_person(tmp_path: Path) -> None:
    rules = Policy.model_validate(
        {
            "roles": {"approver": ["U0ALICE", "U0BOB"], "viewer": ["U0CAROL"]},
            "idle": FAST_IDLE,
        }
    )
    async with demo_stack(tmp_path, policy=rules, sweep_interval=0.3) as stack:
        alert = await the_alert(stack)
        delete = next(
            e
            for b in alert["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == "idle_delete"
        )
        # the page asks before sending, in words that say what the click does
        assert delete["confirm"]["style"] == "danger"
        assert "posts a request" in delete["confirm"]["text"]["text"]
        assert "second person" in delete["confirm"]["text"]["text"]
        await stack.click("bob", alert["ts"], "idle_delete")
        card = await stack.wait(lambda ms: any("Delete request: cpu01" in text_of(m) for m in ms))
        card_message = next(m for m in card if "Delete request: cpu01" in text_of(m))
        assert await stack.requests("DELETE") == []  # an approver's click alone deletes nothing
        await stack.click("bob", card_message["ts"], "approve")  # not their own request
        await stack.wait(
            lambda ms: any(
                m["ephemeral_to"] == "U0BOB" and "someone else must approve" in text_of(m)
                for m in ms
            )
        )
        assert await stack.requests("DELETE") == []
        await stack.click("alice", card_message["ts"], "approve")
        await stack.wait(
            lambda ms: any(m["ts"] == alert["ts"] and "Deleted" in text_of(m) for m in ms),
            limit=20,
        )
        assert len(await stack.requests("DELETE")) == 1
        assert CPU01 not in stack.simulator.clusters


async def test_a_rejected_remedy_gives_the_alert_its_buttons_back(stack: Stack) -> None:
    alert = await the_alert(stack)
    await stack.click("alice", alert["ts"], "idle_scale_to_zero")  # an operator asks
    messages = await stack.wait(lambda ms: any("Resize request: cpu01" in text_of(m) for m in ms))
    card = next(m for m in messages if "Resize request: cpu01" in text_of(m))
    # the card is posted first, then the alert is edited to say so
    await stack.wait(
        lambda ms: any(m["ts"] == alert["ts"] and "waits for an approver" in text_of(m) for m in ms)
    )
    answered = await current(stack, alert["ts"])
    assert not any(b["type"] == "actions" for b in answered["blocks"])
    assert "waits for an approver" in text_of(answered)
    await stack.click("bob", card["ts"], "reject")
    restored = await stack.wait(
        lambda ms: any(m["ts"] == alert["ts"] and "The remedies are back" in text_of(m) for m in ms)
    )
    back = next(m for m in restored if m["ts"] == alert["ts"])
    assert "was *rejected* by <@U0BOB>" in text_of(back)
    ids = [e["action_id"] for b in back["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert ids == ["idle_scale_to_zero", "idle_delete", "idle_keep", "idle_snooze"]
    # and they work again
    await stack.click("bob", alert["ts"], "idle_scale_to_zero")
    await stack.wait(lambda ms: any("done, finished in" in text_of(m) for m in ms), limit=20)
    assert len(await stack.requests("PATCH")) == 1


async def test_snooze_then_alert_again(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, policy=policy(), sweep_interval=0.3) as stack:
        alert = await the_alert(stack)
        status, body = await stack.post(
            "/sandbox/api/click",
            {
                "user": "alice",
                "channel": "ml-infra",
                "ts": alert["ts"],
                "action_id": "idle_snooze",
                "value": f"3600|{CPU01}",
            },
        )
        assert status == 200 and body["status"] == 200
        snoozed = await stack.wait(
            lambda ms: any(m["ts"] == alert["ts"] and "Snoozed" in text_of(m) for m in ms)
        )
        assert "for 1 h" in text_of(next(m for m in snoozed if m["ts"] == alert["ts"]))
        report = text_of(await fresh_report(stack))
        assert "snoozed by <@U0ALICE> until" in report
        assert "Idle report: 0 idle clusters paying ~$0.00/h" in report  # snoozed: not counted
        assert "Snoozed, not counted above: cpu01" in report
        # the snooze runs out: the same alert, reminded in its thread, with its remedies back
        from bot.store import IdleRecords

        records = IdleRecords(stack.service.store)
        record, version = await records.get(CPU01)
        from dataclasses import replace

        assert await records.put(CPU01, replace(record, snoozed_until=0.0), version, 0.0)
        messages = await stack.wait(lambda ms: is_reminded(ms, alert))
        [said] = thread_of(messages, alert)
        assert "*Still idle*: cpu01 has run nothing since" in said and "spent idle so far" in said
        # one alert in the channel for the whole idle period
        assert [m["ts"] for m in messages if is_alert(m)] == [alert["ts"]]


async def test_keep_then_undo_from_the_report(stack: Stack) -> None:
    alert = await the_alert(stack)
    await stack.click("alice", alert["ts"], "idle_keep")
    await stack.wait(lambda ms: any(m["ts"] == alert["ts"] and "Kept" in text_of(m) for m in ms))
    kept = text_of(await current(stack, alert["ts"]))
    assert "*Kept* by <@U0ALICE>" in kept
    # at once, from the last sweep's report and the click since: kept, by whom, and undoable
    last = await stack.reply_to("alice", "/cluster idle")
    assert "cpu01: kept by <@U0ALICE> at <!date^" in text_of(last)
    assert "idle_unkeep" in str(last["blocks"])
    report = await fresh_report(stack, "alice")
    assert "kept by <@U0ALICE>" in text_of(report) and "U0ALICE," not in text_of(report)
    assert "exempt" in text_of(report)
    unkeep = [e for b in report["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert [e["action_id"] for e in unkeep] == ["idle_unkeep", "idle_sweep_now"]
    await stack.click("alice", report["ts"], "idle_unkeep")
    await stack.wait(lambda ms: any("watched for idleness again" in text_of(m) for m in ms))
    # watched again: a new alert comes
    await stack.wait(lambda ms: sum(is_alert(m) and "Scale to zero" in text_of(m) for m in ms) == 1)


async def test_viewer_cannot_act_on_alerts(stack: Stack) -> None:
    alert = await the_alert(stack)
    await stack.click("carol", alert["ts"], "idle_keep")
    messages = await stack.wait(
        lambda ms: any(
            m["ephemeral_to"] == "U0CAROL" and "needs the operator role" in text_of(m) for m in ms
        )
    )
    assert "Kept" not in text_of(next(m for m in messages if m["ts"] == alert["ts"]))


async def test_alert_closed_when_jobs_return(stack: Stack) -> None:
    alert = await the_alert(stack)
    stack.simulator.set_jobs("cpu01", {"running": 1})
    await stack.wait(
        lambda ms: any(m["ts"] == alert["ts"] and "No longer idle" in text_of(m) for m in ms)
    )
    closed = text_of(await current(stack, alert["ts"]))
    assert "1 running and 0 pending Slurm jobs" in closed


async def test_idle_report_explains_each_cluster(stack: Stack) -> None:
    await the_alert(stack)
    text = text_of(await fresh_report(stack))
    assert "Idle report: 1 idle cluster paying ~$1.55/h" in text
    assert "train01" in text and "1 running and 1 pending Slurm jobs" in text
    assert "eval01" in text and "free" in text


async def test_unknown_activity_is_reported_not_alerted(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, policy=policy(), sweep_interval=0.3) as stack:
        await stack.fault(path="cpu01:callSlurmRestApi", status=403, message="not allowed to run")
        text = text_of(await fresh_report(stack))
        assert "cpu01: activity unknown" in text and "not allowed to run" in text
        assert not any(is_alert(m) for m in await stack.messages())


async def test_auto_action_scales_down_after_grace(tmp_path: Path) -> None:
    rules = policy(auto_action="scale_to_zero", grace_minutes=0.01)
    async with demo_stack(tmp_path, policy=rules, sweep_interval=0.3) as stack:
        alert = await the_alert(stack)
        assert "clusterbot will scale to zero cpu01" in text_of(alert)
        await stack.wait(lambda ms: any("done, finished in" in text_of(m) for m in ms), limit=20)
        assert len(await stack.requests("PATCH")) == 1
        audit = text_of(await stack.reply_to("carol", "/cluster audit cpu01"))
        assert "policy" in audit


async def test_a_click_cancels_the_auto_action(tmp_path: Path) -> None:
    rules = policy(auto_action="delete", grace_minutes=0.05)  # 3 s
    async with demo_stack(tmp_path, policy=rules, sweep_interval=0.3) as stack:
        alert = await the_alert(stack)
        await stack.click("alice", alert["ts"], "idle_keep")
        await stack.wait(
            lambda ms: any(m["ts"] == alert["ts"] and "Kept" in text_of(m) for m in ms)
        )
        kept_at = stack.service.clock()

        async def swept_past_the_grace() -> bool:
            latest = await stack.service.core.sweeper.latest()
            return latest is not None and latest.started > kept_at + 3.5

        await stack.wait_for(swept_past_the_grace, limit=20)  # sweeps ran past the grace
        assert await stack.requests("DELETE") == []
        assert await stack.service.store.requests_in(["pending", "approved", "executing"]) == []


def test_sweep_once_prints_a_report(tmp_path: Path) -> None:
    from tests.test_cli import free_port, wait_for

    port = free_port()
    log = (tmp_path / "sim.log").open("w")
    simulator = subprocess.Popen(
        [sys.executable, "-m", "bot", "simulator", "--port", str(port)], stdout=log, stderr=log
    )
    try:
        wait_for(f"http://127.0.0.1:{port}/_sim/requests")
        env = {
            "PATH": "/usr/bin:/bin",
            "CLUSTERBOT_TARGETS": "demo-project/us-central1,demo-project/europe-west4",
            "CLUSTERBOT_VERTEX_API_URL": f"http://127.0.0.1:{port}",
            "CLUSTERBOT_MONITORING_API_URL": f"http://127.0.0.1:{port}",
            "CLUSTERBOT_VERTEX_STATIC_TOKEN": "x",
            "CLUSTERBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'sweep.db'}",
        }
        result = subprocess.run(
            [sys.executable, "-m", "bot", "sweep", "--once", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        statuses = {c["cluster"].rsplit("/", 1)[1]: c["status"] for c in report["clusters"]}
        # eval01's compute pool has no nodes: free at once, never "waiting"
        assert statuses == {"train01": "busy", "cpu01": "waiting", "eval01": "free"}
        by_id = {c["cluster"].rsplit("/", 1)[1]: c for c in report["clusters"]}
        assert by_id["train01"]["recommendation"] is None  # busy: nothing to recommend
        # health as the contract gives it: the demo's drained GPU node, named with Slurm's words
        (drained,) = by_id["train01"]["health"]["nodes"]
        assert drained["name"] == "train01-a4-1" and drained["problem"] == "drained"
        assert drained["reason"].startswith("Xid 79")
        assert by_id["train01"]["health"]["blocked_jobs"] == []
        assert by_id["train01"]["health"]["cluster"] is None
        assert by_id["eval01"]["health"]["nodes"] == [] == by_id["eval01"]["health"]["blocked_jobs"]
        assert report["database"] == str(tmp_path / "sweep.db")
        text = subprocess.run(
            [sys.executable, "-m", "bot", "sweep", "--once"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "3 clusters, 0 alerts posted" in text.stdout
        assert f"database {tmp_path / 'sweep.db'}" in text.stdout
        missing = subprocess.run(
            [sys.executable, "-m", "bot", "sweep", "--once"],
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert missing.returncode == 2 and "CLUSTERBOT_TARGETS is required" in missing.stderr
    finally:
        simulator.terminate()
        simulator.wait(timeout=10)
        log.close()


async def test_a_failing_sweep_is_logged_and_the_next_one_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    async with demo_stack(tmp_path, policy=policy(), sweep_interval=0.3) as stack:

        def drop() -> None:  # the database loses the table under the bot
            db = sqlite3.connect(tmp_path / "clusterbot.db", timeout=30, isolation_level=None)
            db.execute("BEGIN IMMEDIATE")  # wait for the write lock, as the bot's writers do
            db.execute("DROP TABLE idle_records")
            db.execute("COMMIT")
            db.close()

        await asyncio.to_thread(drop)  # off the loop: the bot's writers need it to commit
        for _ in range(100):
            if any("idle-sweep failed" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.05)
        failure = next(r for r in caplog.records if "idle-sweep failed" in r.getMessage())
        assert failure.levelname == "ERROR" and failure.exc_info is not None
        from bot.store import schema

        async with stack.service.store.engine.begin() as connection:  # the table is back
            await connection.run_sync(schema.idle_records.create)
        await the_alert(stack)  # later sweeps ran and alerted


async def test_hidden_jobs_keep_a_cluster_busy_and_are_reported(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, policy=policy(), sweep_interval=0.3) as stack:
        stack.simulator.set_jobs("cpu01", {"jobs": [{"user_name": "bob", "node_count": 1}]})
        stack.simulator.set_slurm("cpu01", {"private_jobs": True})
        text = text_of(await fresh_report(stack))
        assert "1 Slurm node allocated but no job visible to clusterbot" in text
        assert "slurm.conf PrivateData may hide other users' jobs" in text
        assert not any(is_alert(m) for m in await stack.messages())


async def test_reserved_capacity_alert_promises_no_saving(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, policy=policy(), sweep_interval=0.3) as stack:
        stack.simulator.set_jobs("train01", {"jobs": []})  # train01 goes quiet
        alert = await the_alert(stack, "train01")
        text = text_of(alert)
        assert "~$212.00/h" in text  # the reserved B200 nodes are still paid for
        assert "~$0.00/h until the reservation `b200-res` is released" in text
        assert "frees the nodes for other work but no money" in text


async def test_unsnooze_and_stop_keeping_right_on_the_alert(stack: Stack) -> None:
    alert = await the_alert(stack)
    await stack.click("alice", alert["ts"], "idle_snooze")  # the menu's first choice
    await stack.wait(lambda ms: any(m["ts"] == alert["ts"] and "Snoozed" in text_of(m) for m in ms))
    snoozed = await current(stack, alert["ts"])
    buttons = [
        e["action_id"] for b in snoozed["blocks"] if b["type"] == "actions" for e in b["elements"]
    ]
    assert buttons == ["idle_unsnooze"]
    await stack.click("bob", alert["ts"], "idle_unsnooze")
    # watched again: the next sweep reminds in the alert's thread and gives it its remedies
    await stack.wait(lambda ms: is_reminded(ms, alert))
    again = alert
    await stack.click("alice", again["ts"], "idle_keep")
    await stack.wait(lambda ms: any(m["ts"] == again["ts"] and "Kept" in text_of(m) for m in ms))
    kept = await current(stack, again["ts"])
    assert "*Kept* by <@U0ALICE>" in text_of(kept)
    await stack.click("bob", again["ts"], "idle_unkeep")
    # the next sweep reminds again, in the same thread: still one alert in the channel
    messages = await stack.wait(lambda ms: is_reminded(ms, alert, times=2))
    assert [m["ts"] for m in messages if is_alert(m)] == [alert["ts"]]
