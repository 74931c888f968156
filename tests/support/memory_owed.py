"""The owed items in memory, with the SQL store's rules (``bot/store/owed.py``): a key is owed
once, a hold is taken only when the item is due, free and not in flight, and only its holder
renews, marks or settles it. ``tests/test_store.py`` holds the two to one contract."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Unpack

from handlers.owed.model import Owed, OwedChanges, OwedState


@dataclass
class MemoryOwed:
    owed: dict[str, Owed] = field(default_factory=dict)
    down: bool = False  # the database cannot be reached: every call raises

    def _reach(self) -> None:
        if self.down:
            raise ConnectionError("the database cannot be reached")

    def owe_now(self, items: Sequence[Owed]) -> set[str]:
        """Owe in the same step as a state change (the store's one transaction)."""
        new = {i.key for i in items if i.key not in self.owed}
        for item in items:
            if item.key in new:
                self.owed[item.key] = copy.deepcopy(item)
            elif item.again and self.owed[item.key].state != OwedState.DROPPED:
                kept = self.owed[item.key]
                sooner = kept.state == OwedState.DUE and kept.due_at < item.due_at
                due_at = kept.due_at if sooner else item.due_at
                self.owed[item.key] = replace(kept, state=OwedState.DUE, due_at=due_at)
                self.owed[item.key].done_at = None
                new.add(item.key)
        return new

    async def owe(self, items: Sequence[Owed]) -> set[str]:
        self._reach()
        return self.owe_now(items)

    @staticmethod
    def _free(item: Owed, now: float) -> bool:
        return (
            item.state == OwedState.DUE
            and item.due_at <= now
            and item.lease_until < now
            and item.in_flight_until <= now
        )

    def _take(self, item: Owed, owner: str, now: float, lease: float) -> Owed:
        taken = replace(item, owner=owner, lease_until=now + lease, attempts=item.attempts + 1)
        self.owed[item.key] = taken
        return copy.deepcopy(taken)

    async def claim_owed(
        self, owner: str, now: float, lease: float, limit: int, kinds: Sequence[str]
    ) -> list[Owed]:
        self._reach()
        free = [i for i in self.owed.values() if i.kind in kinds and self._free(i, now)]
        free.sort(key=lambda i: i.due_at)
        return [self._take(i, owner, now, lease) for i in free[:limit]]

    async def claim_owed_item(self, key: str, owner: str, now: float, lease: float) -> Owed | None:
        self._reach()
        item = self.owed.get(key)
        if item is None or not self._free(item, now):
            return None
        return self._take(item, owner, now, lease)

    def _held(self, key: str, owner: str) -> Owed | None:
        item = self.owed.get(key)
        if item is None or item.owner != owner or item.state != OwedState.DUE:
            return None
        return item

    async def renew_owed(self, owner: str, keys: Sequence[str], until: float) -> set[str]:
        self._reach()
        held = set()
        for key in keys:
            item = self._held(key, owner)
            if item is not None:
                item.lease_until = until
                held.add(key)
        return held

    async def mark_owed(self, key: str, owner: str, **changes: Unpack[OwedChanges]) -> bool:
        self._reach()
        item = self._held(key, owner)
        if item is None:
            return False
        values: dict[str, Any] = copy.deepcopy(dict(changes))
        self.owed[key] = replace(item, **values)
        return True

    async def settle_owed(
        self,
        key: str,
        owner: str,
        *,
        state: OwedState = OwedState.DUE,
        due_at: float | None = None,
        done_at: float | None = None,
        note: str | None = None,
    ) -> bool:
        self._reach()
        item = self._held(key, owner)
        if item is None:
            return False
        self.owed[key] = replace(
            item,
            state=state,
            owner=None,
            lease_until=0.0,
            note=note,
            due_at=item.due_at if due_at is None else due_at,
            done_at=item.done_at if done_at is None else done_at,
        )
        return True

    async def release_owed(self, owner: str, keys: Sequence[str] | None = None) -> None:
        self._reach()
        for item in self.owed.values():
            if item.owner == owner and (keys is None or item.key in keys):
                item.owner, item.lease_until = None, 0.0

    async def get_owed(self, key: str) -> Owed | None:
        self._reach()
        item = self.owed.get(key)
        return copy.deepcopy(item) if item is not None else None

    async def owed_items(
        self, *, kinds: Sequence[str] | None = None, states: Sequence[OwedState] = (OwedState.DUE,)
    ) -> list[Owed]:
        self._reach()
        found = [
            copy.deepcopy(i)
            for i in self.owed.values()
            if i.state in states and (kinds is None or i.kind in kinds)
        ]
        return sorted(found, key=lambda i: i.due_at)

    async def forget_owed(self, before: float) -> int:
        self._reach()
        gone = [
            k
            for k, i in self.owed.items()
            if i.state != OwedState.DUE and i.done_at is not None and i.done_at < before
        ]
        for key in gone:
            del self.owed[key]
        return len(gone)
