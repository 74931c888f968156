"""A cluster's health over sweeps as episodes: one alert per episode, edited as it changes
and when it heals, a new one only after a quiet period, and what the broken nodes cost."""

from __future__ import annotations

import pytest

from handlers.health.episodes import MAX_GAP, QUIET, Change, advance
from handlers.sweep.health import BrokenNode, ClusterHealth, NodeTrouble

C = "projects/p/locations/r/modelDevelopmentClusters/train01"
SWEEP = 900.0
XID = BrokenNode("train01-a4-1", NodeTrouble.DRAINED, "Xid 79", "root", 0.0, ("a4",))
DOWN = BrokenNode("train01-a4-0", NodeTrouble.DOWN, "Not responding", "slurm", 0.0, ("a4",))


def sick(*nodes: BrokenNode, price: float = 70.0) -> ClusterHealth:
    return ClusterHealth(nodes=nodes, broken_hour=price * len(nodes))


HEALTHY = ClusterHealth()


def test_an_episode_opens_changes_heals_and_comes_back() -> None:
    episode, change = advance(None, C, HEALTHY, 0.0, SWEEP)
    assert (episode, change) == (None, Change.NONE)
    episode, change = advance(None, C, sick(XID), 0.0, SWEEP)
    assert change == Change.OPENED and episode is not None and episode.opened_at == 0.0
    episode, change = advance(episode, C, sick(XID), SWEEP, SWEEP)
    assert change == Change.NONE  # the same problem: nothing to edit
    episode, change = advance(episode, C, sick(XID, DOWN), 2 * SWEEP, SWEEP)
    assert change == Change.WORSE and episode is not None
    assert episode.first_seen == {XID.key: 0.0, DOWN.key: 2 * SWEEP}
    episode, change = advance(episode, C, sick(DOWN), 3 * SWEEP, SWEEP)
    assert change == Change.BETTER
    episode, change = advance(episode, C, HEALTHY, 4 * SWEEP, SWEEP)
    assert change == Change.HEALED and episode is not None and not episode.open
    # back within the quiet period: the same episode, its alert edited
    again, change = advance(episode, C, sick(XID), 4 * SWEEP + QUIET / 2, SWEEP)
    assert change == Change.REOPENED and again is not None and again.opened_at == 0.0
    # back after it: a new episode, a new alert
    later, change = advance(episode, C, sick(XID), 4 * SWEEP + QUIET, SWEEP)
    assert change == Change.OPENED and later is not None and later.opened_at == 4 * SWEEP + QUIET


def test_the_broken_nodes_cost_what_a_sweep_saw_until_the_next() -> None:
    episode, _ = advance(None, C, sick(XID), 0.0, SWEEP)  # one node at $70/h
    episode, _ = advance(episode, C, sick(XID, DOWN), SWEEP, SWEEP)  # 15 min at $70
    episode, _ = advance(episode, C, sick(XID, DOWN), 2 * SWEEP, SWEEP)  # 15 min at $140
    episode, _ = advance(episode, C, HEALTHY, 3 * SWEEP, SWEEP)  # 15 min at $140, healed
    assert episode is not None
    assert episode.cost == pytest.approx(70 * 0.25 + 140 * 0.25 + 140 * 0.25)
    # a gap of a day (the bot down): counted as MAX_GAP sweeps, not as the whole day
    gap, _ = advance(None, C, sick(XID), 0.0, SWEEP)
    gap, _ = advance(gap, C, sick(XID), 86_400.0, SWEEP)
    assert gap is not None and gap.cost == pytest.approx(70 * MAX_GAP * SWEEP / 3600)
