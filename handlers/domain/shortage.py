"""What a RESOURCE_EXHAUSTED refusal means, from what Google documents, as an allow-list.

RESOURCE_EXHAUSTED (HTTP 429, rpc code 8) is "either out of resource quota or reaching rate
limiting" (cloud.google.com/apis/design/errors). The three are told apart only by what Google
writes, and each needs something else of the person who asked:

- *quota*: the project's quota for a metric is used up. ``google.api.ErrorReason``
  RESOURCE_QUOTA_EXCEEDED (metadata ``quota_metric``, ``quota_limit``), a
  ``google.rpc.QuotaFailure`` detail (``violations[].quotaMetric``), or Vertex AI's own words,
  "The following quota metrics exceed quota limits: METRIC" (its real replies, as a 429 and as
  a finished operation's code 8). Trying again does not help until the quota is raised.
- *stockout*: Google has no capacity for the machines now. ``google.rpc.ErrorInfo`` reason
  STOCKOUT (error_details.proto's own example, metadata ``availableRegions``), Compute Engine's
  ZONE_RESOURCE_POOL_EXHAUSTED and ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS, or Vertex AI's
  words "Resources are insufficient in region: REGION". Another region, zone or machine type
  may have it; the same request later may too.
- *rate*: ErrorReason RATE_LIMIT_EXCEEDED: a read may be tried again after a pause.

A RESOURCE_EXHAUSTED that says none of these is *unknown*: shown as Google said it, neither
retried as a change nor called a rate limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from handlers.domain.errors import VertexError, scrub


class Shortage(StrEnum):
    QUOTA = "quota"
    STOCKOUT = "stockout"
    RATE = "rate"
    UNKNOWN = "unknown"


QUOTA_REASONS = frozenset({"RESOURCE_QUOTA_EXCEEDED"})
RATE_REASONS = frozenset({"RATE_LIMIT_EXCEEDED"})
STOCKOUT_REASONS = frozenset(
    {"STOCKOUT", "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"}
)
_QUOTA_WORDS = re.compile(r"quota metrics exceed quota limits:\s*([\w./-]+(?:,\s*[\w./-]+)*)")
_STOCKOUT_WORDS = re.compile(r"Resources are insufficient in region:\s*([\w-]+)")
_LIST = re.compile(r"[\w-]+")
QUOTAS_PAGE = "https://console.cloud.google.com/iam-admin/quotas"


@dataclass(frozen=True)
class ShortageSaid:
    """A RESOURCE_EXHAUSTED as Google explained it: which kind, the quota metrics it names,
    the region it lacks capacity in and the regions or zones it offers instead."""

    kind: Shortage
    metrics: tuple[str, ...] = ()
    region: str | None = None
    elsewhere: tuple[str, ...] = ()

    @property
    def final(self) -> bool:
        """Whether sending the same change again cannot help now (quota, stockout): the
        refusal was on purpose, so the change was not applied either."""
        return self.kind in (Shortage.QUOTA, Shortage.STOCKOUT)


def _infos(details: tuple[dict[str, Any], ...], suffix: str) -> list[dict[str, Any]]:
    return [d for d in details if str(d.get("@type", "")).endswith(suffix)]


def _words(value: Any) -> tuple[str, ...]:
    return tuple(_LIST.findall(str(value)))[:10] if value else ()


def shortage_of(error: VertexError) -> ShortageSaid | None:
    """What a refusal says is short, or None when it is not a RESOURCE_EXHAUSTED and names no
    stockout."""
    infos = _infos(error.details, "google.rpc.ErrorInfo")
    reasons = {str(info.get("reason")) for info in infos}
    meta: dict[str, Any] = {}
    for info in infos:
        meta.update(info.get("metadata") or {})
    stockout = _STOCKOUT_WORDS.search(error.message)
    if reasons & STOCKOUT_REASONS or stockout is not None:
        offered = meta.get("availableRegions") or meta.get("availableZones")
        return ShortageSaid(
            Shortage.STOCKOUT,
            region=stockout.group(1) if stockout else meta.get("region") or meta.get("zone"),
            elsewhere=_words(offered),
        )
    if error.status != "RESOURCE_EXHAUSTED":
        return None
    violations = [
        v for f in _infos(error.details, "google.rpc.QuotaFailure") for v in f.get("violations", [])
    ]
    named = _QUOTA_WORDS.search(error.message)
    found = [meta.get("quota_metric")] + [
        v.get("quotaMetric") for v in violations if isinstance(v, dict)
    ]
    if named is not None:
        found += [m.strip() for m in named.group(1).split(",")]
    metrics = tuple(dict.fromkeys(scrub(str(m), 120) for m in found if m))[:5]
    if reasons & QUOTA_REASONS or violations or named is not None:
        return ShortageSaid(Shortage.QUOTA, metrics=metrics)
    if reasons & RATE_REASONS:
        return ShortageSaid(Shortage.RATE)
    return ShortageSaid(Shortage.UNKNOWN)
