"""Every click is one declaration in handlers/clicks.py: the table refuses, when it is built,
two clicks answering one action id and an id no click answers; reading a click gives its
typed action, or says the bot never offered it."""

from __future__ import annotations

import pytest

from handlers.actions import ActionError, ActionId, Decide, Keep, OpenForm, Snooze
from handlers.clicks import CLICKS, ClickTable
from handlers.policy import Role


def test_the_shipped_table_answers_every_id_once() -> None:
    table = ClickTable()
    assert set(table.by_id) == {str(a) for a in ActionId}
    click, action = table.read("approve", "r-1")
    assert action == Decide("r-1", approve=True) and click.role == Role.VIEWER
    assert table.read("reject", "r-1")[1] == Decide("r-1", approve=False)
    assert table.read("idle_unkeep", "projects/p/x")[1] == Keep("projects/p/x", keep=False)
    assert table.read("idle_snooze", "3600|projects/p/x")[1] == Snooze("projects/p/x", 3600)
    assert table.read("open_form_delete", "delete")[1] == OpenForm("delete")
    assert table.read("idle_keep", "c")[0].names_cluster


def test_a_collision_or_a_forgotten_id_fails_when_the_table_is_built() -> None:
    with pytest.raises(ValueError, match="two clicks answer the action id approve"):
        ClickTable((*CLICKS, CLICKS[0]))
    with pytest.raises(ValueError, match="no click answers restore"):
        ClickTable(tuple(c for c in CLICKS if ActionId.RESTORE not in c.ids))


def test_a_click_never_offered_is_not_understood() -> None:
    table = ClickTable()
    with pytest.raises(ActionError, match="offers no action 'launch_missiles'"):
        table.read("launch_missiles", "")
    with pytest.raises(ActionError, match="carried nothing to act on"):
        table.read("approve", "")
    with pytest.raises(ActionError, match="snooze choice"):
        table.read("idle_snooze", "soon|c")
