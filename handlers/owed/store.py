"""The port the engine keeps its items in (``bot/store/owed.py``, and the in-memory one the
unit tests use)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Unpack

from handlers.owed.model import Owed, OwedChanges, OwedState


class OwedStore(Protocol):
    """The items the bot owes (``handlers/owed``), each changed by one conditional UPDATE."""

    async def owe(self, items: Sequence[Owed]) -> set[str]:
        """Record the items whose keys are new; returns those keys."""
        ...

    async def claim_owed(
        self, owner: str, now: float, lease: float, limit: int, kinds: Sequence[str]
    ) -> list[Owed]:
        """Lease to ``owner`` at most ``limit`` items of ``kinds`` that are due, free (no live
        lease) and not in flight, longest due first; each comes with its attempts counted."""
        ...

    async def claim_owed_item(self, key: str, owner: str, now: float, lease: float) -> Owed | None:
        """``claim_owed`` for one item: None when it is not due, held, or in flight."""
        ...

    async def renew_owed(self, owner: str, keys: Sequence[str], until: float) -> set[str]:
        """Extend the leases ``owner`` still holds among ``keys``; returns those keys."""
        ...

    async def mark_owed(self, key: str, owner: str, **changes: Unpack[OwedChanges]) -> bool:
        """Record on an item ``owner`` holds; False when it holds it no longer."""
        ...

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
        """End ``owner``'s hold: done or dropped, or due again at ``due_at``."""
        ...

    async def release_owed(self, owner: str, keys: Sequence[str] | None = None) -> None:
        """Hand back ``owner``'s holds (all of them when ``keys`` is None) at once; what is
        in flight stays so until its time."""
        ...

    async def get_owed(self, key: str) -> Owed | None: ...

    async def owed_items(
        self, *, kinds: Sequence[str] | None = None, states: Sequence[OwedState] = (OwedState.DUE,)
    ) -> list[Owed]:
        """Items in ``states`` (of ``kinds``), longest due first."""
        ...

    async def forget_owed(self, before: float) -> int:
        """Drop the items that ended before ``before``; returns how many."""
        ...
