"""/metrics after a scripted flow: every series, in Prometheus text format, with its counts."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from handlers.policy import Policy
from tests.support.demo_stack import demo_stack, text_of

SERIES = (
    "clusterbot_commands_total",
    "clusterbot_ack_seconds_bucket",
    "clusterbot_ack_seconds_sum",
    "clusterbot_ack_seconds_count",
    "clusterbot_control_plane_calls_total",
    "clusterbot_operations_in_flight",
    "clusterbot_idle_clusters",
    "clusterbot_idle_cost_per_hour",
    "clusterbot_sweep_seconds_count",
    "clusterbot_unhealthy_nodes",
)
LINE = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9.e+]+$')


async def test_metrics_after_a_scripted_flow(tmp_path: Path) -> None:
    policy = Policy.model_validate(
        {
            "roles": {"operator": ["U0ALICE"], "approver": ["U0BOB"]},
            "idle": {"idle_after_minutes": 0.005},
        }
    )
    async with demo_stack(tmp_path, policy=policy, sweep_interval=0.3) as stack:
        await stack.reply_to("carol", "/cluster list")
        await stack.reply_to("carol", "/cluster show nope01")
        await stack.reply_to("carol", "/cluster resize train01 a4 3")  # denied: a viewer
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("bob", card["ts"], "approve")
        await stack.wait(lambda ms: any("done, finished in" in text_of(m) for m in ms), limit=20)
        await stack.wait(lambda ms: any("Idle cluster: cpu01" in text_of(m) for m in ms))
        # the idle gauges are the last sweep's (one every 0.3 s): read until a sweep after
        # the resize has set them, as a scrape would
        deadline = time.monotonic() + 30
        while True:
            async with stack.session.get(f"{stack.url}/metrics") as reply:
                assert reply.status == 200
                assert reply.headers["Content-Type"].startswith("text/plain")
                text = await reply.text()
            swept = "clusterbot_idle_clusters 1" in text and "cost_per_hour 1.552" in text
            if swept or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all(LINE.match(line) for line in samples), [s for s in samples if not LINE.match(s)]
    for series in SERIES:
        assert any(line.startswith(series) for line in samples), series
    for help_line in (
        "# TYPE clusterbot_commands_total counter",
        "# TYPE clusterbot_ack_seconds histogram",
    ):
        assert help_line in text
    assert 'clusterbot_commands_total{outcome="ok",subcommand="list"} 1' in text
    assert 'clusterbot_commands_total{outcome="bad_input",subcommand="show"} 1' in text
    assert 'clusterbot_commands_total{outcome="denied",subcommand="resize"} 1' in text
    assert 'clusterbot_commands_total{outcome="ok",subcommand="resize"} 1' in text
    assert 'clusterbot_control_plane_calls_total{method="update",status="ok"} 1' in text
    assert re.search(
        r'clusterbot_control_plane_calls_total\{method="call_slurm_rest_api",status="ok"\} [1-9]',
        text,
    )
    assert "clusterbot_idle_clusters 1" in text
    assert "clusterbot_idle_cost_per_hour 1.552" in text
    # the demo's cpu01 has one node drained (ECC memory error)
    assert 'clusterbot_unhealthy_nodes{cluster="cpu01",reason="drained"} 1.0' in text
    # it and train01's drained node are each a health episode, opened by a sweep
    assert 'clusterbot_health_episodes_total{change="opened"} 2.0' in text
    # train01 was UPDATING for the resize: its nodes unread then, its episode not healed
    assert 'clusterbot_health_episodes_total{change="healed"} 0.0' in text
    count = int(re.search(r"clusterbot_ack_seconds_count (\d+)", text).group(1))  # type: ignore[union-attr]
    assert count >= 5  # four commands and a click
