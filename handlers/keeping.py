"""What a capability keeps of each cluster between sweeps, in a record of its own: the spend
ledger its pools' open runs, health its episode. A capability declares the kind of its
record (``RecordKind``: its owner's name and how it is written); the store keeps each kind
apart, changed by compare-and-set, so that a sweep and a click never undo each other and
no capability writes another's record."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from handlers.pacing import paced

R = TypeVar("R")

CAS_TRIES = 5  # compare-and-set attempts before a change is called lost


class ClusterRecord(Protocol):
    @property
    def cluster(self) -> str: ...


@dataclass(frozen=True)
class RecordKind(Generic[R]):
    """One capability's record of a cluster: its owner's name (the store's key beside the
    cluster's), the record of a cluster it has not seen, and its document both ways."""

    owner: str
    empty: Callable[[str], R]
    dump: Callable[[R], Mapping[str, Any]]
    load: Callable[[str, Mapping[str, Any]], R]


class Kept(Protocol[R]):
    """One kind of record, by cluster: each read with its version, each write a
    compare-and-set on it (version 0: not there yet)."""

    async def get(self, cluster: str) -> tuple[R, int]: ...

    async def get_many(self, clusters: Sequence[str]) -> dict[str, tuple[R, int]]: ...

    async def put(self, cluster: str, record: R, version: int, now: float) -> bool: ...

    async def put_many(self, items: Sequence[tuple[str, R, int]], now: float) -> set[str]:
        """Every write in one transaction; the clusters whose write lost to another."""
        ...

    async def all(self) -> list[tuple[str, R]]: ...

    async def delete(self, cluster: str) -> None: ...


class Keeper(Protocol):
    """Where each capability's records are kept (the store)."""

    def of(self, kind: RecordKind[R]) -> Kept[R]: ...


async def change(kept: Kept[R], cluster: str, how: Callable[[R], R], now: Callable[[], float]) -> R:
    """Change one record by compare-and-set, read again when another writer came first."""
    for _ in range(CAS_TRIES):
        record, version = await kept.get(cluster)
        changed = how(record)
        if await kept.put(cluster, changed, version, now()):
            return changed
    raise RuntimeError(f"could not save the record of {cluster}")


async def save_all(
    kept: Kept[R],
    clusters: Sequence[str],
    how: Callable[[str, R], R],
    now: Callable[[], float],
    first: Callable[[Sequence[str]], Awaitable[None]] | None = None,
) -> dict[str, R]:
    """Each cluster's record changed by ``how``, all written in one transaction (those it
    changed); a record another writer changed meanwhile is changed again on its own.
    ``first`` runs before each write with the clusters it writes (a ledger the records'
    closed runs go to first: a crash between the two writes the same runs again)."""
    records = await kept.get_many(clusters)
    after = {}
    async for name in paced(clusters):  # the loop is given back now and then
        after[name] = how(name, records[name][0])
    if first is not None:
        await first(clusters)
    # a record the change left as it was is not written (most clusters' health, every sweep)
    changed = [n for n in clusters if after[n] != records[n][0]]
    lost = await kept.put_many([(n, after[n], records[n][1]) for n in changed], now())
    for name in clusters:
        if name not in lost:
            continue
        for _ in range(CAS_TRIES):
            record, version = await kept.get(name)
            after[name] = how(name, record)
            if first is not None:
                await first([name])
            if await kept.put(name, after[name], version, now()):
                break
        else:
            raise RuntimeError(f"could not save the record of {name}")
    return after
