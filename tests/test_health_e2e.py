"""Health end to end on the whole stack (serve, the Slack stand-in, the simulator over
loopback HTTP): the simulator fails a node, fails a cluster and holds a pending job up on an
unavailable node through its ``/_sim`` API, answers as slurmrestd and the API do, and the
sweep's health alerts say so; Resume, asked and approved on the cards, sends one node update
through ``:callSlurmRestApi`` and the next sweep edits the alert to say healed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.demo_stack import TRAIN01, Stack, demo_stack, text_of

H = 3600


def alert_of(messages: list[dict[str, Any]], cluster: str) -> dict[str, Any] | None:
    return next((m for m in messages if m["text"].startswith(f"Health: {cluster}")), None)


async def swept(stack: Stack) -> None:
    """One whole sweep from now: the demo's own sweeps share the lease, so one that finds
    it taken waits for it and sweeps after."""
    await stack.wait_for(lambda: stack.service.core.sweeper.sweep(force=True))


async def test_a_failed_node_cluster_and_queue_are_alerted_and_a_resume_heals(
    tmp_path: Path,
) -> None:
    async with demo_stack(tmp_path) as stack:
        await swept(stack)
        messages = await stack.wait(lambda ms: alert_of(ms, "train01") and alert_of(ms, "cpu01"))
        train01 = alert_of(messages, "train01")
        assert train01 is not None
        shown = text_of(train01)
        assert "train01-a4-1" in shown and "Xid 79: GPU has fallen off the bus" in shown

        # worse: a second node down, and a pending job that names it held up for 3 h
        status, _ = await stack.post(
            "/vertex/_sim/nodes",
            {
                "cluster": "train01",
                "nodes": {"train01-a4-0": {"state": ["DOWN"], "reason": "Not responding"}},
            },
        )
        assert status == 200
        job = {
            "job_id": 4200,
            "name": "finetune",
            "user_name": "alice",
            "account": "research",
            "partition": "a4",
            "job_state": "PENDING",
            "node_count": 1,
            "required_nodes": ["train01-a4-0"],
            "submitted_ago": 3 * H,
        }
        status, _ = await stack.post("/vertex/_sim/jobs", {"cluster": "train01", "jobs": [job]})
        assert status == 200
        await swept(stack)

        def edited(ms: list[dict[str, Any]]) -> bool:
            now = alert_of(ms, "train01")
            return now is not None and "held up" in now["text"]

        messages = await stack.wait(edited)
        worse = alert_of(messages, "train01")
        assert worse is not None and worse["ts"] == train01["ts"]  # the same alert, edited
        said = text_of(worse)
        assert "2 nodes out of service" in said
        assert (
            "Job 4200 (alice, a4) has waited 3 h on train01-a4-0; Slurm says: ReqNodeNotAvail"
            in said
        )
        assert len([m for m in messages if m["text"].startswith("Health: train01")]) == 1

        # a cluster the control plane reports in ERROR, with its own words
        error = {"code": 13, "message": "Slurm controller failed to start"}
        status, _ = await stack.post(
            "/vertex/_sim/clusters", {"cluster": "cpu01", "state": "ERROR", "error": error}
        )
        assert status == 200
        await swept(stack)
        messages = await stack.wait(
            lambda ms: "ERROR" in text_of(alert_of(ms, "cpu01") or {"text": ""})
        )
        cpu01 = alert_of(messages, "cpu01")
        assert cpu01 is not None
        assert "State ERROR: Slurm controller failed to start." in text_of(cpu01)

        # Resume the drained node: asked by an operator, approved by an approver, sent once
        await stack.post("/vertex/_sim/jobs", {"cluster": "train01", "jobs": []})
        await stack.post(
            "/vertex/_sim/nodes", {"cluster": "train01", "nodes": {"train01-a4-0": None}}
        )
        await swept(stack)  # better: one node left
        await stack.wait(
            lambda ms: "1 node out of service" in text_of(alert_of(ms, "train01") or {"text": ""})
        )
        picked = f"{TRAIN01}|train01-a4-1"  # alice picks the drained node
        await stack.click("alice", train01["ts"], "health_resume", value=picked)
        card = await stack.wait(lambda ms: [m for m in ms if m["text"].startswith("Resume node")])
        [request] = [m for m in card if m["text"].startswith("Resume node request")]
        await stack.click("bob", request["ts"], "approve")
        await stack.wait(lambda ms: any("train01-a4-1 is back in service" in m["text"] for m in ms))
        posts = await stack.requests("POST")
        updates = [
            r["body"]
            for r in posts
            if r["path"].endswith(":callSlurmRestApi") and "/node/" in r["body"]["path"]
        ]
        assert [u["path"].rsplit("/", 1)[-1] for u in updates] == ["train01-a4-1"]
        await swept(stack)
        messages = await stack.wait(
            lambda ms: "Healed" in text_of(alert_of(ms, "train01") or {"text": ""})
        )


async def test_show_and_health_agree_on_a_drained_node(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        await swept(stack)
        shown = text_of(await stack.reply_to("carol", "/cluster show cpu01"))
        # the control plane lists four RUNNING VMs; Slurm had one of them drained
        row = next(line for line in shown.splitlines() if line.startswith("cpu "))
        assert "3 RUNNING, 1 drained" in row
        assert "`cpu01-cpu-3` drained (ECC memory error)" in shown
        assert "/cluster health cpu01" in shown
        health = text_of(await stack.reply_to("carol", "/cluster health cpu01"))
        assert "cpu01-cpu-3" in health and "drained" in health
