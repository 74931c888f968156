"""Forms (modals) end to end through the stand-ins: a command with words missing opens a form,
fields fill in as they are chosen, problems show at their field, and a submission makes the
same request and card as the typed command."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from handlers.dispatch import read
from handlers.forms.asks import FormAsk, FormKind
from handlers.slurm.view import script_digest
from tests.support.demo_stack import CPU01, TRAIN01, Stack, demo_stack, is_card, text_of


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        yield running


async def views(stack: Stack, user: str) -> list[dict[str, Any]]:
    async with stack.session.get(f"{stack.url}/sandbox/api/views?user={user}") as reply:
        assert reply.status == 200
        return list((await reply.json())["views"])


async def modal(stack: Stack, user: str, has_block: str | None = None) -> dict[str, Any]:
    """The user's top modal, once it has the block ``has_block``."""

    async def found() -> dict[str, Any] | None:
        modals = [v for v in await views(stack, user) if v["type"] == "modal"]
        if not modals:
            return None
        top = modals[-1]
        ids = [b.get("block_id") for b in top["blocks"]]
        return top if has_block is None or has_block in ids else None

    result: dict[str, Any] = await stack.wait_for(found)
    return result


async def pick(stack: Stack, user: str, view: dict[str, Any], action: str, value: Any) -> None:
    status, body = await stack.post(
        "/sandbox/api/click",
        {"user": user, "view_id": view["id"], "action_id": action, "value": value},
    )
    assert status == 200 and body["status"] == 200, body


async def choose(stack: Stack, user: str, view: dict[str, Any], cluster: str) -> None:
    """Type in the cluster select, then pick from what the app offered (an external select
    takes only an offered option)."""
    status, _ = await stack.post(
        "/sandbox/api/suggest",
        {"user": user, "view_id": view["id"], "action_id": "form_cluster", "value": ""},
    )
    assert status == 200
    await pick(stack, user, view, "form_cluster", cluster)


async def submit(
    stack: Stack, user: str, view: dict[str, Any], values: dict[str, Any]
) -> dict[str, Any]:
    status, body = await stack.post(
        "/sandbox/api/submit", {"user": user, "view_id": view["id"], "values": values}
    )
    assert status == 200, body
    return dict(body)


def block_text(view: dict[str, Any], block_id: str) -> str:
    return text_of({"text": "", "blocks": [b for b in view["blocks"] if b["block_id"] == block_id]})


async def test_the_resize_form_fills_in_prices_and_makes_the_typed_request(stack: Stack) -> None:
    await stack.command("alice", "/cluster resize")
    form = await modal(stack, "alice")
    assert form["title"] == "Resize a node pool" and form["submit"] == "Ask for approval"
    status, found = await stack.post(
        "/sandbox/api/suggest",
        {"user": "alice", "view_id": form["id"], "action_id": "form_cluster", "value": "TRA"},
    )
    assert status == 200
    [train] = found["options"]
    assert train["value"] == TRAIN01 and train["text"]["text"].startswith("train01 · us-central1")

    await pick(stack, "alice", form, "form_cluster", TRAIN01)
    form = await modal(stack, "alice", "pool")
    pool = next(b for b in form["blocks"] if b["block_id"] == "pool")
    labels = [o["text"]["text"] for o in pool["element"]["options"]]
    assert labels[0] == "a4 · a4-highgpu-8g · 2 nodes"

    await pick(stack, "alice", form, "form_pool", "a4")
    form = await modal(stack, "alice", "cost")
    assert "*Cost now*" in block_text(form, "cost")
    before = block_text(form, "cost")
    # the pool is 2:2; a Min of 3 above the Max shown is said at Max as it is typed, in the
    # words the submission uses, and no cost after is guessed at
    await pick(stack, "alice", form, "form_min", "3")
    form = await modal(stack, "alice", "problem:max")
    assert block_text(form, "problem:max").strip() == ":warning: MAX 2 is less than MIN 3"
    assert "*After*\n-" in block_text(form, "cost")
    await pick(stack, "alice", form, "form_max", "5")

    async def repriced() -> dict[str, Any] | None:
        now = await modal(stack, "alice", "cost")
        shown = {b.get("block_id") for b in now["blocks"]}
        fresh = block_text(now, "cost") not in (before, "")
        return (
            now
            if fresh and "problem:max" not in shown and "+$" in block_text(now, "cost")
            else None
        )

    form = await stack.wait_for(repriced)
    assert "+$" in block_text(form, "cost")  # a third node costs more

    # a problem shows at its field, and nothing is asked
    answer = await submit(stack, "alice", form, {"max:a4": {"form_max": "2"}})
    assert answer["errors"] == {"max:a4": "MAX 2 is less than MIN 3"}
    assert not [m for m in await stack.messages() if is_card(m)]

    answer = await submit(stack, "alice", form, {"max:a4": {"form_max": "5"}})
    assert answer["status"] == 200 and answer["errors"] == {}
    assert await views(stack, "alice") == []  # the form closed
    messages = await stack.wait(lambda ms: any(is_card(m) for m in ms))
    card = text_of(next(m for m in messages if is_card(m)))
    assert "Resize request: train01 / a4" in card and "3:5" in card


async def test_a_negative_count_is_refused_at_its_field_as_it_is_typed(stack: Stack) -> None:
    await stack.command("alice", "/cluster resize train01 a4")
    form = await modal(stack, "alice", "cost")
    await pick(stack, "alice", form, "form_min", "-1")
    form = await modal(stack, "alice", "problem:min")
    said = "MIN -1: a node count cannot be negative"
    assert block_text(form, "problem:min").strip() == f":warning: {said}"
    answer = await submit(stack, "alice", form, {"min:a4": {"form_min": "-1"}})
    assert answer["status"] == 200 and answer["errors"] == {"min:a4": said}  # the same words
    assert not [m for m in await stack.messages() if is_card(m)]


async def test_a_command_naming_the_cluster_opens_the_form_at_it(stack: Stack) -> None:
    await stack.command("alice", "/cluster resize CPU01 cpu")
    form = await modal(stack, "alice", "min:cpu")
    cluster = next(b for b in form["blocks"] if b["block_id"] == "cluster")
    assert cluster["element"]["initial_option"]["value"] == CPU01
    assert form["state"]["values"]["min:cpu"]["form_min"]["value"] == "4"
    await stack.command("alice", "/cluster resize nosuch")
    form = await modal(stack, "alice")

    async def told() -> bool:
        top = (await views(stack, "alice"))[-1]
        return "there is no cluster nosuch" in text_of({"text": "", "blocks": top["blocks"]})

    assert await stack.wait_for(told)


async def test_the_delete_form_asks_for_the_id_typed_again(stack: Stack) -> None:
    await stack.command("alice", "/cluster delete")
    form = await modal(stack, "alice")
    await choose(stack, "alice", form, CPU01)
    form = await modal(stack, "alice", "confirm")
    shown = text_of({"text": "", "blocks": form["blocks"]})
    assert "This deletes *cpu01*: pools login (1 node), cpu (4 nodes);" in shown
    answer = await submit(stack, "alice", form, {"confirm": {"form_confirm": "cpu1"}})
    assert answer["errors"] == {"confirm": "type cpu01 to confirm"}
    answer = await submit(stack, "alice", form, {"confirm": {"form_confirm": "CPU01"}})
    assert answer["errors"] == {}
    messages = await stack.wait(lambda ms: any(is_card(m) for m in ms))
    assert "Delete request: cpu01" in text_of(next(m for m in messages if is_card(m)))


async def test_required_fields_are_kept_by_slack_before_the_app_hears(stack: Stack) -> None:
    await stack.command("alice", "/cluster delete")
    form = await modal(stack, "alice")
    await choose(stack, "alice", form, CPU01)
    form = await modal(stack, "alice", "confirm")
    answer = await submit(stack, "alice", form, {})
    assert answer["status"] is None and answer["errors"] == {"confirm": "This field is required."}


async def test_a_viewer_gets_the_refusal_not_a_form(stack: Stack) -> None:
    reply = text_of(await stack.reply_to("carol", "/cluster resize"))
    assert "needs the operator role; you are viewer" in reply
    assert await views(stack, "carol") == []


SCRIPT = "#!/bin/bash\n# check the GPUs before each job\nnvidia-smi -L > /dev/null\n"


async def test_a_prolog_script_is_added_from_a_pasted_text(stack: Stack) -> None:
    slurm = stack.simulator.clusters[TRAIN01]["orchestratorSpec"]["slurmSpec"]
    old = list(slurm.get("prologBashScripts") or [])
    await stack.command("alice", "/cluster slurm train01 prolog add")
    form = await modal(stack, "alice", "paste")
    assert form["title"] == "Add a prolog script"
    both = await submit(
        stack,
        "alice",
        form,
        {
            "paste": {"form_paste": SCRIPT},
            "file": {"form_file": {"name": "x.sh", "content": SCRIPT}},
        },
    )
    assert "not both" in both["errors"]["file"]
    form = await modal(stack, "alice", "paste")
    answer = await submit(
        stack, "alice", form, {"paste": {"form_paste": SCRIPT}, "file": {"form_file": []}}
    )
    assert answer["errors"] == {}, answer
    messages = await stack.wait(lambda ms: any(is_card(m) for m in ms))
    card = next(m for m in messages if is_card(m))
    added = f"add prolog at place {len(old) + 1}: {len(SCRIPT)} bytes"
    assert f"{added}, sha256 {script_digest(SCRIPT)}" in text_of(card)
    await stack.click("bob", card["ts"], "approve")

    async def patched() -> list[dict[str, Any]]:
        return await stack.requests("PATCH")

    [patch] = await stack.wait_for(patched)
    assert patch["query"] == {"updateMask": "orchestrator_spec.slurm_spec.prolog_bash_scripts"}

    async def applied() -> bool:
        now = stack.simulator.clusters[TRAIN01]["orchestratorSpec"]["slurmSpec"]
        return now.get("prologBashScripts") == [*old, SCRIPT]

    assert await stack.wait_for(applied)


async def test_a_script_is_replaced_from_an_uploaded_file(stack: Stack) -> None:
    spec = stack.simulator.clusters[TRAIN01]["orchestratorSpec"]["slurmSpec"]
    spec["epilogBashScripts"] = ["#!/bin/bash\necho old\n", "#!/bin/bash\necho keep\n"]
    await stack.command("alice", "/cluster slurm train01 epilog replace 1")
    form = await modal(stack, "alice", "file")
    assert form["title"] == "Replace epilog 1"
    place = form["state"]["values"]["place"]["form_place"]["selected_option"]["value"]
    assert place == "replace:1"
    new = "#!/bin/bash\necho new\n"
    answer = await submit(
        stack, "alice", form, {"file": {"form_file": {"name": "epilog.sh", "content": new}}}
    )
    assert answer["errors"] == {}, answer
    messages = await stack.wait(lambda ms: any(is_card(m) for m in ms))
    card = next(m for m in messages if is_card(m))
    assert "replace epilog 1" in text_of(card)
    await stack.click("bob", card["ts"], "approve")

    async def applied() -> bool:
        scripts = stack.simulator.clusters[TRAIN01]["orchestratorSpec"]["slurmSpec"]
        return scripts.get("epilogBashScripts") == [new, "#!/bin/bash\necho keep\n"]

    assert await stack.wait_for(applied)


async def test_an_uploaded_file_is_served_only_with_the_bot_token(stack: Stack) -> None:
    await stack.command("alice", "/cluster slurm train01 prolog add")
    form = await modal(stack, "alice", "file")
    await pick(stack, "alice", form, "form_file", {"name": "p.sh", "content": "echo hi\n"})
    [form] = await views(stack, "alice")
    [file] = form["state"]["values"]["file"]["form_file"]["files"]
    async with stack.session.get(file["url_private"]) as reply:
        assert reply.content_type == "text/html"  # Slack's sign-in page, not the file
    token = stack.workspace.bot_token
    headers = {"Authorization": f"Bearer {token}"}
    async with stack.session.get(file["url_private"], headers=headers) as reply:
        assert await reply.text() == "echo hi\n"


@pytest.mark.parametrize(
    ("text", "ask"),
    [
        ("resize", FormAsk(FormKind.RESIZE)),
        ("resize Train01", FormAsk(FormKind.RESIZE, "train01")),
        ("resize train01 a4", FormAsk(FormKind.RESIZE, "train01", "a4")),
        ("resize train01 a4 3", None),
        ("resize train01 A$ ", None),
        ("delete", FormAsk(FormKind.DELETE)),
        ("delete cpu01", None),
        ("slurm train01 prolog add", FormAsk(FormKind.SCRIPT, "train01", which="prolog")),
        ("slurm t1 epilog add 2", FormAsk(FormKind.SCRIPT, "t1", which="epilog", place=2)),
        ("slurm t1 epilog replace 2", FormAsk(FormKind.SCRIPT, "t1", which="epilog", replace=2)),
        ("slurm t1 epilog replace", None),
        ("slurm t1 set", FormAsk(FormKind.SETTING, "t1")),
        ("slurm t1 set PreemptMode=OFF", None),
        ("slurm t1 epilog remove 2", None),
        ("list", None),
    ],
)
def test_which_commands_ask_for_a_form(text: str, ask: FormAsk | None) -> None:
    words = read(text)  # read once: the form it opens, and the command or why it is wrong
    assert words.form == ask
    assert words.command is not None or words.error is not None


def test_full_width_digits_and_letters_are_read_as_ascii() -> None:
    from handlers.capabilities import REGISTRY
    from handlers.changes.commands import Resize
    from handlers.reading.commands import help_reply
    from tests.support.words import parse

    assert parse("resize ｔｒａｉｎ０１ a4 ３") == Resize("train01", "a4", 3, 3)
    assert parse("resize train01\u3000a4 ２:５") == Resize(
        "train01", "a4", 2, 5
    )  # ideographic space
    assert read("ｒｅｓｉｚｅ").form == FormAsk(FormKind.RESIZE)
    shown = " ".join(str(part) for part in help_reply(REGISTRY.commands, None).parts)
    assert "Full-width digits and letters" in shown


async def test_a_slurm_setting_is_changed_from_a_form(stack: Stack) -> None:
    await stack.command("alice", "/cluster slurm train01 set")
    form = await modal(stack, "alice", "value")
    assert form["title"] == "Change a Slurm setting"
    keys = next(b for b in form["blocks"] if b["block_id"] == "key")
    labels = [o["text"]["text"] for o in keys["element"]["options"]]
    assert "PriorityType = priority/multifactor" in labels and "PreemptMode (not set)" in labels
    answer = await submit(
        stack, "alice", form, {"key": {"form_key": "PreemptMode"}, "value": {"form_value": "X"}}
    )
    assert "PreemptMode=X is not valid" in answer["errors"]["value"]  # the plan's own check
    answer = await submit(stack, "alice", form, {"value": {"form_value": "REQUEUE"}})
    assert answer["errors"] == {}, answer
    messages = await stack.wait(lambda ms: any(is_card(m) for m in ms))
    card = text_of(next(m for m in messages if is_card(m)))
    assert "Slurm settings request: train01" in card and "set PreemptMode = REQUEUE" in card


def test_without_a_form_the_words_are_still_needed() -> None:
    """Where no form can open (no trigger: the dispatcher alone), the command's own parser
    still says what is missing."""
    from handlers.grammar import CommandError
    from tests.support.words import parse

    for text, reason in (
        ("slurm train01 set", "slurm set needs KEY=VALUE"),
        ("resize train01", "resize needs"),
        ("slurm train01 prolog add", "takes the script in a form"),
    ):
        with pytest.raises(CommandError, match=reason):
            parse(text)


async def test_what_the_plan_refuses_shows_at_a_field_the_form_has(stack: Stack) -> None:
    await stack.command("alice", "/cluster resize train01 a4")
    form = await modal(stack, "alice", "min:a4")
    same = await submit(stack, "alice", form, {"max:a4": {"form_max": "2"}})  # a4 is 2 now
    assert list(same["errors"]) == ["max:a4"]
    assert "already has bounds 2" in same["errors"]["max:a4"]
    # a script form has no cluster field: a cluster problem shows at its last field
    await stack.command("carol", "/cluster slurm train01 prolog add")
    assert await views(stack, "carol") == []  # a viewer gets no form
    await stack.command("alice", "/cluster slurm train01 prolog add")
    script = await modal(stack, "alice", "paste")
    stack.simulator.clusters.pop(TRAIN01)
    gone = await submit(stack, "alice", script, {"paste": {"form_paste": "echo hi"}})
    assert list(gone["errors"]) == ["place"] and "train01" in gone["errors"]["place"]
    assert not [m for m in await stack.messages() if is_card(m)]


@pytest.mark.parametrize("metadata", ["not json", "[1, 2]", '{"kind": 3}', ""])
async def test_a_form_with_metadata_not_ours_is_answered_not_a_500(
    tmp_path: Path, metadata: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A view with our callback id but private_metadata we did not write (forged, or from
    another version) gets a clear answer with a logged reference, never an HTTP 500."""
    payload = {
        "type": "view_submission",
        "team": {"id": "T0DEMO"},
        "user": {"id": "U0ALICE", "name": "alice", "team_id": "T0DEMO"},
        "api_app_id": "A0CLUSTERBOT",
        "token": "t",
        "trigger_id": "1.2.3",
        "view": {
            "id": "V0FORGED",
            "type": "modal",
            "callback_id": "clusterbot_form",
            "private_metadata": metadata,
            "state": {"values": {}},
            "hash": "1.a",
        },
    }
    body = urlencode({"payload": json.dumps(payload)})
    async with demo_stack(tmp_path) as stack:
        status, answered = await stack.deliver(body)
    assert status == 200
    answer = json.loads(answered)
    assert answer["response_action"] == "update"
    text = answer["view"]["blocks"][0]["text"]["text"]
    reference = re.search(r"reference `([0-9a-f]{8})`", text)
    assert reference is not None and "open it again with `/cluster`" in text
    assert any(reference.group(1) in r.getMessage() for r in caplog.records)
