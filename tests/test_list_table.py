"""`/cluster list` as a table that fits the message pane: a row for each pool, the project
named once when there is one, the target in each row when there are several."""

from __future__ import annotations

from bot.slack.render import render
from bot.vertex.client import KeptListing
from handlers.domain.names import Target
from handlers.reading.clusters import ListRow, list_reply


def rows(target: Target, *names: str) -> KeptListing[ListRow]:
    kept = [
        ListRow(
            n, str(target), "RUNNING", 1.5, ("login: 1 x n2-standard-4", "cpu: 2 x n2-standard-8")
        )
        for n in names
    ]
    return KeptListing(target, kept)


def table_of(listings: list[KeptListing[ListRow]]) -> str:
    _text, blocks = render(list_reply(listings))
    return next(b["text"]["text"] for b in blocks if "```" in b.get("text", {}).get("text", ""))


def test_one_project_is_named_once_and_each_pool_has_its_row() -> None:
    listings = [
        rows(Target("p-one", "us-central1"), "a01"),
        rows(Target("p-one", "europe-west4"), "b01"),
    ]
    reply = list_reply(listings)
    assert reply.summary == "2 clusters"
    assert table_of(listings) == (
        "```CLUSTER  REGION        STATE       $/H  POOLS\n"
        "a01      us-central1   RUNNING  ~$1.50  login: 1 x n2-standard-4\n"
        "                                        cpu: 2 x n2-standard-8\n"
        "b01      europe-west4  RUNNING  ~$1.50  login: 1 x n2-standard-4\n"
        "                                        cpu: 2 x n2-standard-8```"
    )


def test_several_projects_keep_the_target_in_each_row() -> None:
    listings = [
        rows(Target("p-one", "us-central1"), "a01"),
        rows(Target("p-two", "us-central1"), "c01"),
    ]
    table = table_of(listings)
    assert table.startswith("```CLUSTER  TARGET ")
    assert "\nc01      p-two/us-central1  RUNNING" in table
