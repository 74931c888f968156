"""A capability's records saved together: only the changed ones written, a record another
writer changed meanwhile changed again on its own, and what goes first (a ledger) before each
write."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from handlers.keeping import RecordKind, change, save_all
from tests.support.memory import MemoryKept


@dataclass(frozen=True)
class Count:
    cluster: str
    seen: int = 0


COUNT = RecordKind("count", Count, lambda r: {"seen": r.seen}, lambda c, d: Count(c, d["seen"]))


class Racing(MemoryKept[Count]):
    """Another writer changes ``b`` between the bulk read and the bulk write."""

    async def put_many(self, items: Sequence[tuple[str, Count, int]], now: float) -> set[str]:
        record, version = self.rows["b"]
        self.rows["b"] = (Count("b", record.seen + 100), version + 1)
        return await super().put_many(items, now)


async def test_only_changed_records_are_written_and_a_raced_one_is_changed_again() -> None:
    kept = Racing(COUNT)
    kept.rows = {"a": (Count("a", 1), 1), "b": (Count("b", 1), 1), "c": (Count("c", 7), 3)}
    firsts: list[list[str]] = []

    def bump(name: str, record: Count) -> Count:
        return record if name == "c" else Count(name, record.seen + 1)

    async def first(names: Sequence[str]) -> None:
        firsts.append(list(names))

    after = await save_all(kept, ["a", "b", "c", "d"], bump, lambda: 5.0, first)
    assert kept.rows["a"] == (Count("a", 2), 2)
    assert kept.rows["b"] == (Count("b", 102), 3)  # the other writer's change, then this one
    assert kept.rows["c"] == (Count("c", 7), 3)  # unchanged: not written, its version kept
    assert kept.rows["d"] == (Count("d", 1), 1)  # new
    assert after["b"] == Count("b", 102)
    assert firsts == [["a", "b", "c", "d"], ["b"]]  # before the bulk write, and the retry's


async def test_a_change_is_read_again_when_another_writer_came_first() -> None:
    kept = MemoryKept(COUNT)
    calls = 0

    def racing(record: Count) -> Count:
        nonlocal calls
        calls += 1
        if calls == 1:  # someone writes between this read and its write
            kept.rows["a"] = (Count("a", 50), 1)
        return Count("a", record.seen + 1)

    assert await change(kept, "a", racing, lambda: 1.0) == Count("a", 51)
    assert kept.rows["a"] == (Count("a", 51), 2) and calls == 2
