"""End-to-end scenarios: signed Slack requests in, Web API and control-plane calls out, all
over HTTP on loopback through the Slack stand-in and the simulator."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from slack_sdk.signature import SignatureVerifier

from bot.sandbox.controlplane import Durations
from bot.sandbox.controlplane.rpc import LOST_REPLY_STATUSES
from bot.slack.messenger import SlackMessenger
from handlers.changes.ledger import told_key
from handlers.owed.model import OwedState
from handlers.policy import Policy
from tests.support.demo_stack import (
    CPU01,
    TRAIN01,
    Stack,
    demo_stack,
    ends_and_mentions,
    is_card,
    pool_of,
    text_of,
    thread_of,
)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        yield running


# -- reads ---------------------------------------------------------------------------------------


async def test_help_lists_every_subcommand(stack: Stack) -> None:
    reply = await stack.reply_to("carol", "/cluster help")
    assert reply["ephemeral_to"] == "U0CAROL"
    for word in ("list", "show CLUSTER", "resize CLUSTER POOL N", "delete", "ops", "idle", "audit"):
        assert word in text_of(reply)
    topic = await stack.reply_to("carol", "/cluster help resize")
    assert "MIN:MAX" in text_of(topic)


async def test_list_shows_every_target(stack: Stack) -> None:
    reply = await stack.reply_to("carol", "/cluster list")
    text = text_of(reply)
    assert reply["ephemeral_to"] == "U0CAROL"
    for row in ("train01", "cpu01", "eval01", "europe-west4", "~$212.39"):
        assert row in text
    # one project: named once above a table with a row for each pool
    assert "Clusters (3) in demo-project\n```CLUSTER  REGION" in text
    assert "a4: 2 x a4-highgpu-8g (8 x NVIDIA_B200)" in text
    assert "Estimated total ~$214.33/h" in text


async def test_show_describes_one_cluster(stack: Stack) -> None:
    text = text_of(await stack.reply_to("carol", "/cluster show TRAIN01"))  # ids are lowercase
    for fact in (
        "train01 · GPU training (B200)",
        "a4-highgpu-8g (8 x NVIDIA_B200) (RESERVATION b200-res)",
        "2 RUNNING",
        "`a4` (default): a4",
        "home-fs",
        "PriorityType=priority/multifactor",
        "1 / 0 scripts",
        "VM_REBOOT",
    ):
        assert fact in text, fact


async def test_show_by_full_name_and_unknown_cluster(stack: Stack) -> None:
    assert "cpu01" in text_of(await stack.reply_to("carol", f"/cluster show {CPU01}"))
    text = text_of(await stack.reply_to("carol", "/cluster show nope01"))
    assert (
        "there is no cluster nope01 in demo-project/us-central1, demo-project/europe-west4" in text
    )
    assert "Usage: /cluster show CLUSTER" in text


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("/cluster resize train01 a4 3:2", "MIN 3 is more than MAX 2"),
        ("/cluster resize train01 a4 lots", "'lots' is not a node count"),
        ("/cluster reszie train01 a4 3", "did you mean 'resize'?"),
        ("/cluster show Train-01", "'Train-01' is not a cluster"),
        (
            "/cluster show trian01",
            "there is no cluster trian01 in demo-project/us-central1, "
            "demo-project/europe-west4; did you mean train01?",
        ),
        ("/cluster list everything", "list does not take 'everything'"),
        (
            "/cluster resize train01 gpu 3",
            "train01 has no node pool 'gpu'; its pools are a4, login",
        ),
        ("/cluster resize train01 a4 2", "pool 'a4' of train01 already has bounds 2"),
        ("/cluster resize train01 login 0", "'login' is the login pool"),
        # bolt-python reads a form body with the word "payload" in it as an interactive
        # payload: the bot must answer it like any other word
        ("/cluster jobs train01 user payload extra", "'extra' needs a value"),
        ("/cluster payload", "there is no subcommand 'payload'"),
    ],
)
async def test_bad_input_gets_a_reason_and_usage(stack: Stack, command: str, words: str) -> None:
    reply = await stack.reply_to("alice", command)
    assert reply["ephemeral_to"] == "U0ALICE"
    text = text_of(reply)
    assert words in text
    assert "Usage:" in text
    assert "Traceback" not in text


async def test_user_text_is_escaped(stack: Stack) -> None:
    text = text_of(await stack.reply_to("alice", "/cluster show <!channel>"))
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text


# -- approvals -----------------------------------------------------------------------------------


async def test_resize_approved_runs_to_done(stack: Stack) -> None:
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    text = text_of(card)
    assert card["ephemeral_to"] is None
    for fact in ("<@U0ALICE> asks to resize *train01*", "2 -&gt; 3", "~$318.39/h", "~+$106.00/h"):
        assert fact in text, fact
    actions = next(b for b in card["blocks"] if b["type"] == "actions")["elements"]
    assert [a["action_id"] for a in actions] == ["approve", "reject", "withdraw"]

    assert (await stack.click("bob", card["ts"], "approve"))["status"] == 200
    # the end, and the reply that tells alice (posted after it: the audit's answer below
    # must not be taken for it)
    messages = await stack.wait(
        lambda ms: (
            any("done, finished in" in t for t in thread_of(ms, card))
            and any("your request is done" in t for t in thread_of(ms, card))
        ),
        limit=20,
    )
    final_card = next(m for m in messages if m["ts"] == card["ts"])
    assert "*Done*: approved by <@U0BOB>" in text_of(final_card)
    assert not any(b["type"] == "actions" for b in final_card["blocks"])
    patches = await stack.requests("PATCH")
    assert len(patches) == 1 and patches[0]["query"] == {"updateMask": "node_pools"}
    pool = pool_of(stack.simulator.clusters[TRAIN01], "a4")
    assert pool["scalingSpec"] == {"minNodeCount": 3, "maxNodeCount": 3}
    finals = [t for t in thread_of(messages, card) if "done, finished in" in t]
    assert len(finals) == 1

    audit = text_of(await stack.reply_to("carol", "/cluster audit train01"))
    for action in ("asked for", "approved", " started ", "— done:"):
        assert action in audit, action


async def test_min_max_resize(stack: Stack) -> None:
    card = await stack.card("alice", "/cluster resize cpu01 cpu 1:6")
    assert "4 -&gt; 1:6" in text_of(card) or "4:4 -&gt; 1:6" in text_of(card)
    await stack.click("bob", card["ts"], "approve")
    await stack.wait(
        lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), limit=20
    )
    pool = pool_of(stack.simulator.clusters[CPU01], "cpu")
    assert pool["scalingSpec"] == {"minNodeCount": 1, "maxNodeCount": 6}


async def test_viewer_cannot_request_and_operator_cannot_approve(stack: Stack) -> None:
    text = text_of(await stack.reply_to("carol", "/cluster resize train01 a4 3"))
    assert "/cluster resize needs the operator role; you are viewer" in text
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    for user, role in (("carol", "viewer"), ("alice", "operator")):
        await stack.click(user, card["ts"], "approve")
        messages = await stack.wait(
            lambda ms, u=user: any(
                m["ephemeral_to"] == f"U0{u.upper()}" and "cannot approve" in text_of(m) for m in ms
            )
        )
        refusal = [m for m in messages if m["ephemeral_to"] == f"U0{user.upper()}"][-1]
        assert f"needs the approver role; you are {role}" in text_of(refusal)
    assert await stack.requests("PATCH") == []
    pending = next(m for m in await stack.messages() if m["ts"] == card["ts"])
    assert any(b["type"] == "actions" for b in pending["blocks"])  # still open


async def test_self_approval_is_refused(tmp_path: Path) -> None:
    policy = Policy.model_validate({"roles": {"approver": ["U0ALICE", "U0BOB"]}})
    async with demo_stack(tmp_path, policy=policy) as stack:
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("alice", card["ts"], "approve")
        messages = await stack.wait(
            lambda ms: any(
                m["ephemeral_to"] == "U0ALICE" and "someone else" in text_of(m) for m in ms
            )
        )
        [told] = [m for m in messages if "someone else" in text_of(m)]
        assert "you asked for this change" in text_of(told)
        assert await stack.requests("PATCH") == []
        await stack.click("bob", card["ts"], "approve")
        await stack.wait(
            lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), limit=20
        )


async def test_fifty_concurrent_clicks_send_one_patch(stack: Stack) -> None:
    card = await stack.card("alice", "/cluster resize train01 a4 4")
    clicks = await asyncio.gather(*(stack.click("bob", card["ts"], "approve") for _ in range(50)))
    assert all(c["status"] == 200 for c in clicks)
    await stack.wait(
        lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), limit=30
    )
    assert len(await stack.requests("PATCH")) == 1
    messages = await stack.wait(
        lambda ms: (
            sum(
                "already running" in text_of(m)
                or "already approved" in text_of(m)
                or "already succeeded" in text_of(m)
                for m in ms
            )
            >= 1
        )
    )
    finals = [t for t in thread_of(messages, card) if "done, finished in" in t]
    assert len(finals) == 1


async def test_reject_closes_the_card(stack: Stack) -> None:
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    await stack.click("bob", card["ts"], "reject")
    messages = await stack.wait(
        lambda ms: any(m["ts"] == card["ts"] and "*Rejected* by <@U0BOB>" in text_of(m) for m in ms)
    )
    closed = next(m for m in messages if m["ts"] == card["ts"])
    assert not any(b["type"] == "actions" for b in closed["blocks"])
    assert await stack.requests("PATCH") == []
    status, later = await stack.post(
        "/sandbox/api/click",
        {"user": "bob", "channel": "ml-infra", "ts": card["ts"], "action_id": "approve"},
    )
    assert status == 404 and later["error"] == "no_such_button"  # the button is gone


async def test_delete_needs_confirmation_and_removes_the_cluster(stack: Stack) -> None:
    card = await stack.card("alice", "/cluster delete cpu01")
    text = text_of(card)
    assert "asks to *delete* cluster *cpu01*" in text
    assert "the Slurm controller" in text and "home-cpu" in text
    approve = next(b for b in card["blocks"] if b["type"] == "actions")["elements"][0]
    assert approve["style"] == "danger" and approve["confirm"]["style"] == "danger"
    await stack.click("bob", card["ts"], "approve")
    await stack.wait(
        lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), limit=20
    )
    assert CPU01 not in stack.simulator.clusters
    assert len(await stack.requests("DELETE")) == 1


async def test_second_request_for_a_busy_cluster_is_refused(stack: Stack) -> None:
    await stack.card("alice", "/cluster resize train01 a4 3")
    text = text_of(await stack.reply_to("alice", "/cluster delete train01"))
    assert "train01 already has an open resize request" in text
    assert "Usage" not in text


async def test_change_since_plan_is_refused(stack: Stack) -> None:
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    # someone resizes the pool elsewhere (the console, another bot) before the approval
    pool_of(stack.simulator.clusters[TRAIN01], "a4")["scalingSpec"] = {
        "minNodeCount": 5,
        "maxNodeCount": 5,
    }
    await stack.click("bob", card["ts"], "approve")
    messages = await stack.wait(
        lambda ms: any(m["ts"] == card["ts"] and "Not applied" in text_of(m) for m in ms)
    )
    refused = text_of(next(m for m in messages if m["ts"] == card["ts"]))
    assert "pool 'a4' now has bounds 5 (was 2 when this was requested)" in refused
    assert await stack.requests("PATCH") == []


async def test_request_expires(tmp_path: Path) -> None:
    policy = Policy.model_validate(
        {
            "roles": {"operator": ["U0ALICE"], "approver": ["U0BOB"]},
            "approval": {"expiry_minutes": 0.01},
        }
    )
    async with demo_stack(tmp_path, policy=policy, expiry_seconds=0.1) as stack:
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        messages = await stack.wait(
            lambda ms: any(m["ts"] == card["ts"] and "*Expired*" in text_of(m) for m in ms)
        )
        expired = next(m for m in messages if m["ts"] == card["ts"])
        assert not any(b["type"] == "actions" for b in expired["blocks"])
        assert await stack.requests("PATCH") == []
        assert "expired" in text_of(await stack.reply_to("carol", "/cluster audit"))


# -- failures ------------------------------------------------------------------------------------


async def test_operation_failure_is_surfaced(stack: Stack) -> None:
    await stack.fault(
        method="PATCH",
        operation_error={"code": 8, "message": "Quota 'B200_GPUS' exceeded in us-central1"},
    )
    card = await stack.card("alice", "/cluster resize train01 a4 6")
    await stack.click("bob", card["ts"], "approve")
    messages = await stack.wait(
        lambda ms: any("failed" in t for t in thread_of(ms, card)), limit=20
    )
    failure = next(t for t in thread_of(messages, card) if "failed after" in t)
    assert "Quota 'B200_GPUS' exceeded in us-central1 (RESOURCE_EXHAUSTED)" in failure
    messages = await stack.wait(
        lambda ms: any(m["ts"] == card["ts"] and "*Failed*" in text_of(m) for m in ms)
    )


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (403, "PERMISSION_DENIED"),
        (404, "NOT_FOUND"),
        (503, "UNAVAILABLE"),
    ],
)
async def test_upstream_errors_on_list_are_clear(stack: Stack, status: int, words: str) -> None:
    await stack.fault(method="GET", path="locations/europe-west4", status=status, message="nope")
    text = text_of(await stack.reply_to("carol", "/cluster list"))
    assert "train01" in text  # the other target still answers
    assert f"Could not list demo-project/europe-west4: nope ({words})" in text


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (403, "PERMISSION_DENIED) (the bot's service account lacks permission)"),
        (503, "UNAVAILABLE) (the control plane is unavailable; try again in a minute)"),
    ],
)
async def test_upstream_errors_on_change_are_clear(stack: Stack, status: int, words: str) -> None:
    await stack.fault(method="PATCH", status=status, message="refused by the control plane")
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    await stack.click("bob", card["ts"], "approve")
    messages = await stack.wait(
        lambda ms: any(m["ts"] == card["ts"] and "Not applied" in text_of(m) for m in ms)
    )
    text = text_of(next(m for m in messages if m["ts"] == card["ts"]))
    assert "Could not resize train01: refused by the control plane (" + words in text


async def test_show_during_outage_says_so(stack: Stack) -> None:
    await stack.fault(method="GET", status=503)
    text = text_of(await stack.reply_to("carol", "/cluster show train01"))
    assert "train01 is not in the targets that could be read (none)" in text
    assert "so it may be there: demo-project/us-central1:" in text and "(UNAVAILABLE)" in text
    assert "there is no cluster" not in text


# -- the edge ------------------------------------------------------------------------------------


async def test_forged_stale_and_unsigned_requests_are_refused(stack: Stack) -> None:
    body = "command=%2Fcluster&text=resize+train01+a4+9&user_id=U0BOB&channel_id=C0MLINFRA"
    now = str(int(time.time()))
    good = SignatureVerifier(stack.workspace.signing_secret)
    cases = {
        "unsigned": {},
        "forged": {
            "X-Slack-Request-Timestamp": now,
            "X-Slack-Signature": SignatureVerifier("not-the-secret").generate_signature(
                timestamp=now, body=body
            ),
        },
        "stale": {
            "X-Slack-Request-Timestamp": str(int(time.time()) - 600),
            "X-Slack-Signature": good.generate_signature(
                timestamp=str(int(time.time()) - 600), body=body
            ),
        },
    }
    for name, headers in cases.items():
        async with stack.session.post(
            f"{stack.url}/slack/events",
            data=body,
            headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
        ) as reply:
            assert reply.status == 401, name
    # refused before any listener: nothing was counted, asked or answered
    commands = stack.service.metrics.commands.collect()
    assert [sample for metric in commands for sample in metric.samples] == []
    assert not stack.service.chat.background.tasks
    assert await stack.messages() == []
    assert await stack.requests("PATCH") == []


@pytest.mark.parametrize(
    ("name", "body", "timestamp"),
    [
        ("malformed form", b"payload=%7Bnot+json&&&%%%", None),
        ("not UTF-8", b"\xff\xfe\xfa payload=\x80\x81", None),
        ("timestamp not a number", b"command=%2Fcluster&text=list", "yesterday"),
        ("huge forged body", b"text=" + b"A" * 200_000, None),
    ],
)
async def test_malformed_requests_get_one_warning_and_no_traceback(
    stack: Stack, caplog: pytest.LogCaptureFixture, name: str, body: bytes, timestamp: str | None
) -> None:
    stamp = timestamp or str(int(time.time()))
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": "v0=" + "0" * 64,
    }
    caplog.clear()
    async with stack.session.post(f"{stack.url}/slack/events", data=body, headers=headers) as r:
        assert r.status == 401, name
        assert await r.json() == {"error": "invalid request"}
    refused = [r for r in caplog.records if "refused a request" in r.getMessage()]
    assert len(refused) == 1 and refused[0].levelname == "WARNING"
    assert all(r.exc_info is None and r.levelno < 40 for r in caplog.records)
    assert all(len(r.getMessage()) < 300 for r in caplog.records)  # bodies are not logged
    assert "AAAA" not in caplog.text


async def test_a_signed_body_that_is_not_utf8_is_a_bad_request(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    body = b"text=\xff\xfe"
    stamp = str(int(time.time()))
    import hashlib
    import hmac

    signature = (
        "v0="
        + hmac.new(
            stack.workspace.signing_secret.encode(),
            b"v0:" + stamp.encode() + b":" + body,
            hashlib.sha256,
        ).hexdigest()
    )
    headers = {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}
    async with stack.session.post(f"{stack.url}/slack/events", data=body, headers=headers) as r:
        assert r.status == 400
    assert all(r.exc_info is None for r in caplog.records)


async def test_health_ready_and_metrics(stack: Stack) -> None:
    await stack.reply_to("carol", "/cluster list")
    await stack.reply_to("carol", "/cluster nonsense")
    async with stack.session.get(f"{stack.url}/healthz") as reply:
        assert reply.status == 200
    async with stack.session.get(f"{stack.url}/readyz") as reply:
        assert reply.status == 200 and (await reply.json())["database"] is True
    async with stack.session.get(f"{stack.url}/metrics") as reply:
        text = await reply.text()
    assert 'clusterbot_commands_total{outcome="ok",subcommand="list"} 1' in text
    assert 'clusterbot_commands_total{outcome="bad_input",subcommand="unknown"} 1' in text
    assert "clusterbot_ack_seconds_count 2" in text
    assert 'clusterbot_control_plane_calls_total{method="list",status="ok"}' in text


# -- restarts ------------------------------------------------------------------------------------


async def test_restart_mid_operation_resumes_and_posts_once(tmp_path: Path) -> None:
    slow = Durations(create=1, update=4, delete=1)
    async with demo_stack(tmp_path, durations=slow) as stack:
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("bob", card["ts"], "approve")
        await stack.wait(lambda ms: any("%" in t for t in thread_of(ms, card)))  # mid-operation
        first = stack.service
        await first.stop()  # SIGTERM: stop taking work, hand the operation back
        assert not [t for t in thread_of(await stack.messages(), card) if "done, finished" in t]

        from bot.app import ClusterbotService

        second = ClusterbotService(first.settings, first.policy, tick_seconds=0.1, owner="second")
        await second.start()
        try:
            await stack.wait_for(lambda: second_done(second), limit=20)
            messages = await stack.messages()
            finals = [t for t in thread_of(messages, card) if "done, finished in" in t]
            ends, mentions = ends_and_mentions(thread_of(messages, card))
            assert len(finals) == 1 and len(ends) == 1 and len(mentions) == 1
            done = next(m for m in messages if m["ts"] == card["ts"])
            assert "*Done*" in text_of(done)
        finally:
            await second.stop()


async def second_done(service: object) -> bool:
    from bot.app import ClusterbotService

    assert isinstance(service, ClusterbotService)
    requests = await service.store.requests_in(["succeeded"])
    if len(requests) != 1 or await service.store.count_in_flight():
        return False
    # and its end told (the card, the thread's end, the mention): owed, done at a tick
    told = await service.store.get_owed(told_key(requests[0].id))
    return told is not None and told.state == OwedState.DONE


async def test_crash_mid_operation_resumes_after_the_lease(tmp_path: Path) -> None:
    slow = Durations(create=1, update=3, delete=1)
    async with demo_stack(tmp_path, durations=slow, lease=2.0) as stack:
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("bob", card["ts"], "approve")
        await stack.wait(lambda ms: any("%" in t for t in thread_of(ms, card)))  # mid-operation
        first = stack.service
        await first.jobs.stop(0)  # the process dies: no clean hand-over, leases stay
        first.accepting = False

        from bot.app import ClusterbotService

        second = ClusterbotService(
            first.settings, first.policy, tick_seconds=0.1, owner="second", lease=2.0
        )
        await second.start()
        try:
            await stack.wait_for(lambda: second_done(second), limit=30)
            messages = await stack.messages()
            finals = [t for t in thread_of(messages, card) if "done, finished in" in t]
            ends, mentions = ends_and_mentions(thread_of(messages, card))
            assert len(finals) == 1 and len(ends) == 1 and len(mentions) == 1
            # the duration is the operation's own (3 s), not stretched by the failover
            took = re.search(r"finished in (\d+) s", finals[0])
            assert took is not None and int(took.group(1)) in (3, 4), finals[0]
        finally:
            await second.stop()
        assert is_card(next(m for m in messages if m["ts"] == card["ts"]))


async def test_roles_from_a_slack_user_group(tmp_path: Path) -> None:
    policy = Policy.model_validate(
        {"roles": {"operator": ["U0ALICE"], "approver": ["S0APPROVERS"]}, "default_role": "viewer"}
    )
    async with demo_stack(tmp_path, policy=policy) as stack:
        stack.workspace.scopes.add("usergroups:read")  # the manifest's optional scope, granted
        stack.workspace.groups["S0APPROVERS"] = ["U0CAROL"]  # carol approves through the group
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("bob", card["ts"], "approve")  # bob is only a viewer here
        await stack.wait(
            lambda ms: any(
                m["ephemeral_to"] == "U0BOB" and "you are viewer" in text_of(m) for m in ms
            )
        )
        await stack.click("carol", card["ts"], "approve")
        await stack.wait(
            lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), limit=20
        )
        assert len(await stack.requests("PATCH")) == 1


async def test_a_user_group_without_its_scope_grants_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Installed without usergroups:read, Slack answers missing_scope: the group's members
    get the default role, and the log says which group could not be read and why."""
    policy = Policy.model_validate(
        {"roles": {"operator": ["U0ALICE"], "approver": ["S0APPROVERS"]}, "default_role": "viewer"}
    )
    async with demo_stack(tmp_path, policy=policy) as stack:
        stack.workspace.groups["S0APPROVERS"] = ["U0CAROL"]
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("carol", card["ts"], "approve")
        await stack.wait(
            lambda ms: any(
                m["ephemeral_to"] == "U0CAROL" and "you are viewer" in text_of(m) for m in ms
            )
        )
        assert await stack.requests("PATCH") == []
    assert (
        "cannot read user group S0APPROVERS: missing_scope (the app needs the usergroups:read "
        "scope)" in caplog.text
    )


async def test_channels_outside_the_policy_are_refused(tmp_path: Path) -> None:
    policy = Policy.model_validate({"channels": ["C0GENERAL"], "roles": {"operator": ["U0ALICE"]}})
    async with demo_stack(tmp_path, policy=policy) as stack:
        text = text_of(await stack.reply_to("alice", "/cluster list"))
        assert "clusterbot is not enabled in this channel; use <#C0GENERAL>" in text
        await stack.command("alice", "/cluster list", channel="general")
        messages: list[dict[str, object]] = []
        for _ in range(100):
            async with stack.session.get(
                f"{stack.url}/sandbox/api/messages?channel=general"
            ) as reply:
                messages = (await reply.json())["messages"]
            if messages:
                break
            await asyncio.sleep(0.05)
        assert "train01" in text_of(messages[-1])


async def test_slack_rate_limits_delay_progress_and_lose_nothing(stack: Stack) -> None:
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    # the next progress post and the next edits are refused with 429 and Retry-After: 1
    status, _ = await stack.post(
        "/sandbox/api/config",
        {"force_ratelimit": {"chat.postMessage": 1, "chat.update": 2}, "retry_after": 1},
    )
    assert status == 200
    await stack.click("bob", card["ts"], "approve")
    messages = await stack.wait(
        lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), limit=30
    )
    finals = [t for t in thread_of(messages, card) if "done, finished in" in t]
    assert len(finals) == 1
    done = next(m for m in messages if m["ts"] == card["ts"])
    assert "*Done*" in text_of(done)
    _, limits = await stack.post("/sandbox/api/config", {})
    assert limits["force_ratelimit"] == {"chat.postMessage": 0, "chat.update": 0}  # all served
    # each 429 paused its whole method in the bot's budget, not only the call that got it
    messenger = stack.service.chat.messenger
    assert isinstance(messenger, SlackMessenger)
    assert set(messenger.pacer.budget.paused_until) == {"chat.postMessage", "chat.update"}


async def test_ops_lists_operations_in_flight(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, durations=Durations(create=1, update=5, delete=1)) as stack:
        assert "None: no change is running right now" in text_of(
            await stack.reply_to("carol", "/cluster ops")
        )
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("bob", card["ts"], "approve")
        # the thread message is posted first, then the change is sent and followed: wait for
        # the tracker's first progress in it
        await stack.wait(lambda ms: any("%" in t for t in thread_of(ms, card)))
        text = text_of(await stack.reply_to("carol", "/cluster ops"))
        assert "Operations in flight (1)" in text
        request_id = text_of(card).split("request `", 1)[1].split("`", 1)[0]
        row = next(line for line in text.splitlines() if line.startswith("train01"))
        assert request_id in row and "%" in row  # the simulator's progress, e.g. "(40%)"
        await stack.wait(
            lambda ms: any("done, finished in" in t for t in thread_of(ms, card)), limit=20
        )
        assert "Operations in flight (0)" in text_of(await stack.reply_to("carol", "/cluster ops"))


# -- interactive reads have a deadline -------------------------------------------------------------


async def test_list_answers_in_time_naming_the_slow_target(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, working_after=0.3) as stack:
        stack.service.core.directory.read_deadline = 1.0
        await stack.fault(method="GET", path="locations/europe-west4", latency_ms=5000)
        before = len(await stack.messages())
        started = time.monotonic()
        await stack.command("carol", "/cluster list")
        working = await stack.wait(lambda ms: any("Working on it" in text_of(m) for m in ms))
        note = next(m for m in working if "Working on it" in text_of(m))
        assert note["ephemeral_to"] == "U0CAROL"
        messages = await stack.wait(
            lambda ms: any(m["ts"] == note["ts"] and "train01" in text_of(m) for m in ms)
        )
        took = time.monotonic() - started
        reply = next(m for m in messages if m["ts"] == note["ts"])
        text = text_of(reply)
        assert "Could not list demo-project/europe-west4" in text
        assert "did not answer within 1 s (DEADLINE_EXCEEDED)" in text
        assert took < 4.0  # well before the slow target answers
        assert len(messages) == before + 1  # one reply: "Working on it…" was replaced


async def test_show_on_a_target_that_cannot_be_read_says_so(stack: Stack) -> None:
    await stack.fault(method="GET", path="locations/europe-west4", status=503)
    text = text_of(await stack.reply_to("carol", "/cluster show eval01"))
    assert "there is no cluster" not in text
    assert "eval01 is not in the targets that could be read (demo-project/us-central1)" in text
    assert "demo-project/europe-west4: The service is currently unavailable. (UNAVAILABLE)" in text


# -- every failure after a write is looked up ---------------------------------------------------


@pytest.mark.parametrize("lost", [*sorted(LOST_REPLY_STATUSES), "broken connection"])
async def test_a_lost_reply_after_the_change_applied_is_followed_to_done(
    stack: Stack, lost: int | str
) -> None:
    how = {"status": lost} if isinstance(lost, int) else {"drop": True}
    await stack.fault(method="PATCH", when="after", count=1, **how)
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    await stack.click("bob", card["ts"], "approve")
    messages = await stack.wait(
        lambda ms: any(m["ts"] == card["ts"] and "*Done*" in text_of(m) for m in ms), limit=20
    )
    assert "Not applied" not in text_of(next(m for m in messages if m["ts"] == card["ts"]))
    assert len(await stack.requests("PATCH")) == 1  # never replayed
    assert pool_of(stack.simulator.clusters[TRAIN01], "a4")["scalingSpec"]["minNodeCount"] == 3


async def test_a_lost_reply_that_cannot_be_looked_up_is_outcome_unknown(stack: Stack) -> None:
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    await stack.fault(method="PATCH", status=503, when="after", count=1)
    # the re-read before the PATCH goes through; the look-up after it is refused
    await stack.fault(method="GET", path="train01$", status=403, message="no look", skip=1)
    await stack.click("bob", card["ts"], "approve")
    # the card and its thread message are two edits: wait for both
    messages = await stack.wait(
        lambda ms: (
            any(m["ts"] == card["ts"] and "Outcome unknown" in text_of(m) for m in ms)
            and any("outcome unknown" in t for t in thread_of(ms, card))
        ),
        limit=20,
    )
    text = text_of(next(m for m in messages if m["ts"] == card["ts"]))
    assert "Not applied" not in text and "/cluster show train01" in text
    assert len(await stack.requests("PATCH")) == 1


async def test_a_secret_echoed_by_the_control_plane_never_reaches_slack(tmp_path: Path) -> None:
    token = "static-vertex-token-9f8e7d"
    async with demo_stack(tmp_path, vertex_static_token=SecretStr(token)) as stack:
        await stack.fault(
            method="PATCH",
            operation_error={"code": 13, "message": f"backend rejected credential {token}"},
        )
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("bob", card["ts"], "approve")
        messages = await stack.wait(
            lambda ms: any("failed after" in t for t in thread_of(ms, card)), limit=20
        )
        everything = json.dumps(messages)
        assert token not in everything
        assert "backend rejected credential [redacted]" in everything


# -- deciding: approvers reject, requesters withdraw ---------------------------------------------


async def test_only_approvers_reject_and_the_requester_withdraws(tmp_path: Path) -> None:
    policy = Policy.model_validate(
        {"roles": {"operator": ["U0ALICE", "U0CAROL"], "approver": ["U0BOB"]}}
    )
    async with demo_stack(tmp_path, policy=policy) as stack:
        card = await stack.card("alice", "/cluster resize train01 a4 3")
        await stack.click("carol", card["ts"], "reject")  # an operator, not the requester
        await stack.wait(
            lambda ms: any(
                m["ephemeral_to"] == "U0CAROL" and "Rejecting is for approvers" in text_of(m)
                for m in ms
            )
        )
        await stack.click("carol", card["ts"], "withdraw")  # not theirs to withdraw
        await stack.wait(
            lambda ms: any(
                m["ephemeral_to"] == "U0CAROL" and "Only <@U0ALICE>" in text_of(m) for m in ms
            )
        )
        await stack.click("alice", card["ts"], "withdraw")
        messages = await stack.wait(
            lambda ms: any(m["ts"] == card["ts"] and "*Withdrawn* by" in text_of(m) for m in ms)
        )
        closed = next(m for m in messages if m["ts"] == card["ts"])
        assert not any(b["type"] == "actions" for b in closed["blocks"])
        audit = text_of(await stack.reply_to("carol", "/cluster audit train01"))
        assert "withdrew" in audit and "withdrawn" not in audit and "rejected" not in audit
        # the cluster is free again
        assert "Resize request" in text_of(
            await stack.card("carol", "/cluster resize train01 a4 4")
        )


async def test_a_change_asked_in_a_channel_the_bot_is_not_in(stack: Stack) -> None:
    await stack.command("alice", "/cluster resize train01 a4 3", channel="random")
    async with stack.session.get(
        f"{stack.url}/sandbox/api/messages?channel=random&user=alice"
    ) as reply:
        seen = (await reply.json())["messages"]
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.05)
        async with stack.session.get(
            f"{stack.url}/sandbox/api/messages?channel=random&user=alice"
        ) as reply:
            seen = (await reply.json())["messages"]
    [answer] = seen
    assert answer["ephemeral_to"] == "U0ALICE"
    assert "not_in_channel" in text_of(answer) and "/invite @clusterbot" in text_of(answer)
    assert await stack.service.store.requests_in(["draft", "pending"]) == []
