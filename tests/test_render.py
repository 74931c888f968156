"""The renderer keeps every reply within Slack's limits, whatever the handlers produce."""

from __future__ import annotations

from bot.sandbox.slack.blockkit import problems
from bot.slack.render import clip, render
from handlers.actions import Decide, Withdraw
from handlers.replies import Button, Buttons, Field, Fields, Heading, Reply, Table, Text


def test_long_tables_split_into_sections_within_limits() -> None:
    lines = tuple(f"row {n:04d} " + "x" * 90 for n in range(200))  # about 20,000 characters
    table = Table.of(("",), [(line,) for line in lines])
    _, blocks = render(Reply("big").add(Heading("h"), table))
    assert problems(blocks) == []
    sections = [b for b in blocks if b["type"] == "section"]
    assert len(sections) > 6
    joined = "".join(s["text"]["text"].strip("`") for s in sections)
    assert all(line in joined for line in lines)  # nothing lost, lines never cut in two


def test_more_than_fifty_parts_keeps_the_buttons() -> None:
    reply = Reply("many").add(*(Text(f"part {n}") for n in range(80)))
    reply.add(Buttons((Button(Decide("r-1", approve=True), "Approve"),)))
    _, blocks = render(reply)
    assert len(blocks) == 50 and problems(blocks) == []
    assert blocks[-1]["type"] == "actions"
    assert blocks[-2]["elements"][0]["text"] == "32 more parts not shown"


def test_actions_blocks_are_named_after_their_first_action_and_unique_in_the_message() -> None:
    """The core says nothing of block ids: the renderer names each actions block so a click
    whose value Slack left out still says what it is about, and never twice in a message
    (Slack refuses a repeated block_id: invalid_blocks)."""
    decide = (Button(Decide("r-1", approve=True), "Approve"), Button(Withdraw("r-1"), "Withdraw"))
    reply = Reply("two").add(Buttons(decide), Text("between"), Buttons(decide))
    _, blocks = render(reply)
    named = [b["block_id"] for b in blocks if b["type"] == "actions"]
    assert named == ["approve:r-1", "approve:r-1#2"] and problems(blocks) == []


def test_long_texts_and_many_fields_are_trimmed_and_split() -> None:
    reply = Reply("s" * 5000).add(
        Heading("H" * 300), Text("t" * 4000), Fields(tuple(Field(f"f{n}", "v") for n in range(23)))
    )
    text, blocks = render(reply)
    assert problems(blocks) == [] and len(text) == 3000
    assert len(blocks[0]["text"]["text"]) == 150
    assert [len(b.get("fields", [])) for b in blocks[2:]] == [10, 10, 3]


def test_user_text_in_the_summary_is_escaped() -> None:
    text, _ = render(Reply("<!channel> & <@U1>"))
    assert text == "&lt;!channel&gt; &amp; &lt;@U1&gt;"


def test_truncation_never_cuts_an_entity_or_a_mention() -> None:

    text = "x" * 10 + "&amp;&lt;<@U0ALICE>&gt;" + "y" * 50
    for limit in range(5, len(text)):
        cut = clip(text, limit)
        assert len(cut) <= limit
        body = cut.removesuffix("…")
        # every '&' starts a whole entity, every '<' a whole <...>
        for index, char in enumerate(body):
            if char == "&":
                assert ";" in body[index:], (limit, cut)
            if char == "<":
                assert ">" in body[index:], (limit, cut)


def test_table_columns_are_aligned_whatever_the_width_of_a_cell() -> None:
    """A long pool id once pushed the show table's columns out of line."""
    table = Table.of(
        ("POOL", "NODES", "MACHINE"),
        [("a4", "2", "a4-highgpu-8g"), ("a-very-long-pool-id-indeed", "12", "n2-standard-8")],
        right=frozenset({1}),
    )
    _, blocks = render(Reply("t").add(table))
    lines = blocks[0]["text"]["text"].strip("`").splitlines()
    assert len(lines) == 3
    machine = lines[0].index("MACHINE")
    assert [line[machine:] for line in lines] == ["MACHINE", "a4-highgpu-8g", "n2-standard-8"]
    nodes_end = lines[0].index("NODES") + len("NODES")
    assert [line[:nodes_end].split()[-1] for line in lines] == ["NODES", "2", "12"]
    assert lines[2] == "a-very-long-pool-id-indeed     12  n2-standard-8"


def test_secrets_leave_no_block_whatever_characters_they_hold() -> None:
    from bot.redact import Redactor

    password = 'pa"ss\\word9'  # a quote and a backslash, escaped in JSON text
    reply = Reply(f"db {password}").add(
        Text(f"failed: {password}"), Text("token xoxb-1234-abcd"), Text("nothing here")
    )
    text, blocks = render(reply, Redactor([password]))
    shown = str(blocks) + text
    assert password not in shown and "xoxb-1234" not in shown
    assert "nothing here" in shown and shown.count("[redacted]") == 3


def test_a_table_wider_than_the_message_pane_is_drawn_as_lines_that_wrap() -> None:
    from bot.slack.render import TABLE_WIDTH, render
    from handlers.replies import Reply, Table

    narrow = Table.of(("POOL", "NODES"), [("a4", "2"), ("login", "1")])
    [block] = render(Reply("t").add(narrow))[1]
    assert block["text"]["text"] == "```POOL   NODES\na4     2\nlogin  1```"
    # the demo's list at a desktop's width: one table
    listed = Table.of(
        ("CLUSTER", "TARGET", "POOLS"),
        [("train01", "demo-project/us-central1", "a4: 2 x a4-highgpu-8g (8 x NVIDIA_B200)")],
    )
    [block] = render(Reply("t").add(listed))[1]
    assert block["text"]["text"].startswith("```CLUSTER  TARGET")
    pools = (
        "a4: 2 x a4-highgpu-8g (8 x NVIDIA_B200), login: 1 x n2-standard-8, b: 4 x a3-megagpu-8g"
    )
    wide = Table.of(
        ("CLUSTER", "TARGET", "POOLS"), [("train01", "demo-project/us-central1", pools)]
    )
    [block] = render(Reply("t").add(wide))[1]
    text = block["text"]["text"]
    assert "```" not in text
    assert text == f"*train01* · TARGET demo-project/us-central1 · POOLS {pools}"
    assert len(f"train01  demo-project/us-central1  {pools}") > TABLE_WIDTH
    # the width is what a person sees: "&" takes one column, not the five of "&amp;"
    ampersands = Table.of(("WHO", "NOTE"), [("R&D", "&" * 50)])
    [block] = render(Reply("t").add(ampersands))[1]
    assert block["text"]["text"] == f"```WHO  NOTE\nR&amp;D  {'&amp;' * 50}```"
