"""The control plane's write quota kept by the bot: slots spread a crowd of changes over the
minutes the quota allows, and a change whose slot came early waits until the calls of the
last minute, counted when they came back, leave room for its own."""

from __future__ import annotations

from handlers.pacing import WriteQuota
from tests.conftest import ManualClock

SCOPE = "projects/p/locations/us-central1"


def test_slots_spread_a_crowd_over_the_minutes_the_quota_allows(clock: ManualClock) -> None:
    quota = WriteQuota(3, clock)
    start = clock()
    assert [quota.slot(f"c{n}", SCOPE) - start for n in range(7)] == [0, 0, 0, 60, 60, 60, 120]
    assert quota.slot("c3", SCOPE) - start == 60  # a change keeps its slot
    assert quota.slot("person", SCOPE, ahead=True) == start  # a person's change goes at once


def test_a_call_goes_only_when_the_minute_has_room_counted_from_the_answers(
    clock: ManualClock,
) -> None:
    """Three a minute. The first call is slow on its way (its re-read and records, or the
    network): the server counts it when it arrives, up to its answer. The fourth change's
    slot comes a minute after the first's, but its call may go only a minute after the
    first call came back, or the server would see four in one minute."""
    quota = WriteQuota(3, clock)
    start = clock()
    for key in ("a", "b", "c"):
        assert quota.go(key, SCOPE) == start
    assert quota.go("d", SCOPE) == start + 1.0  # three on their way: look again shortly
    clock.advance(0.1)
    assert quota.answered("b", SCOPE) and quota.answered("c", SCOPE)
    clock.advance(4.9)
    assert quota.answered("a", SCOPE)  # the slow one, answered at 5 s
    assert not quota.answered("a", SCOPE)  # once
    clock.now = start + 60.0  # d's slot
    assert quota.go("d", SCOPE) == start + 60.1  # b's answer leaves the minute first
    clock.now = start + 60.1
    assert quota.go("d", SCOPE) == start + 60.1  # now it may go
    assert quota.go("e", SCOPE) == start + 60.1  # c left at the same moment
    assert quota.go("f", SCOPE) == start + 65.0  # a's place: a minute after its answer
    assert quota.go("person", SCOPE, ahead=True) == start + 60.1  # a person's goes anyway
