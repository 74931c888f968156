"""A page of a cluster listing read straight from its bytes, each cluster as the caller
keeps it; a page with a cluster that does not fit is read again cluster by cluster, to name
it and the field at fault."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.vertex.summary import ClusterSummary
from bot.vertex.transport import field_path, json_object
from handlers.domain.models import Cluster

# view-clusters: "a modelDevelopmentClusters array"; an older manage-cluster page says
# "a clusters array". Both are read.
LIST_KEYS = ("modelDevelopmentClusters", "clusters")
K = TypeVar("K")
C = TypeVar("C", Cluster, ClusterSummary)


@dataclass(frozen=True)
class UnreadableCluster:
    """A cluster in a listing that could not be read, and the field at fault."""

    name: str
    problem: str


class ListPage(BaseModel, Generic[C]):
    """A list reply read straight from its bytes (the keys of view-clusters, or the older
    manage-cluster page's), each cluster as ``C`` reads it."""

    model_config = ConfigDict(extra="ignore")
    modelDevelopmentClusters: list[C] | None = None
    clusters: list[C] | None = None
    nextPageToken: str | None = None


_PAGES: dict[type[BaseModel], type[ListPage[Any]]] = {
    Cluster: ListPage[Cluster],
    ClusterSummary: ListPage[ClusterSummary],
}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Reading a page builds thousands of small objects and no garbage cycles; Python's cycle
    collector would run several times over the whole heap meanwhile (three times the cost of
    the reading itself). It is paused for that one synchronous step only."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def same(cluster: C) -> C:
    return cluster


def read_page(
    body: bytes, model: type[C], keep: Callable[[C], K]
) -> tuple[list[K], list[UnreadableCluster], str | None]:
    """``keep`` of each cluster of a page, with the clusters that could not be read and the
    next page's token. What is not kept is freed before the collector runs again: it then
    walks only what was kept, not every object the page was read into."""
    with _collector_paused():
        try:
            page = _PAGES[model].model_validate_json(body)
        except ValidationError:
            return _read_page_slowly(body, model, keep)
        found = page.modelDevelopmentClusters or page.clusters or []
        kept, token = [keep(cluster) for cluster in found], page.nextPageToken
        del page, found
    return kept, [], token


def _read_page_slowly(
    body: bytes, model: type[C], keep: Callable[[C], K]
) -> tuple[list[K], list[UnreadableCluster], str | None]:
    """Cluster by cluster, naming each that cannot be read and the field at fault."""
    document = json_object(body)
    items: list[Any] = next(
        (document[k] for k in LIST_KEYS if isinstance(document.get(k), list)), []
    )
    kept: list[K] = []
    unreadable: list[UnreadableCluster] = []
    for item in items:
        try:
            kept.append(keep(model.model_validate(item)))
        except ValidationError as error:
            name = item.get("name") if isinstance(item, dict) else None
            unreadable.append(UnreadableCluster(str(name or "?"), field_path(error)))
    next_token = document.get("nextPageToken")
    return kept, unreadable, next_token if isinstance(next_token, str) else None
