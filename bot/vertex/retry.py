"""When and how long to wait before trying a control-plane call again (AIP-194).

Exponential backoff with full jitter, as google-api-core does: initial 1 s, x2, at most 60 s
between tries, 120 s in all. ``Retry-After`` from the server is a floor on the wait.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from handlers.domain.errors import (
    DeadlineExceededError,
    InternalError,
    MalformedReplyError,
    ResourceExhaustedError,
    TransportError,
    UnavailableError,
    UnknownError,
    VertexError,
)
from handlers.domain.shortage import shortage_of


def _final(error: VertexError) -> bool:
    """A quota used up or a stockout: refused on purpose, and the same again is refused too
    (``handlers.domain.shortage``)."""
    said = shortage_of(error)
    return said is not None and said.final


@dataclass(frozen=True)
class RetryPolicy:
    initial: float = 1.0
    multiplier: float = 2.0
    maximum: float = 60.0
    deadline: float = 120.0

    def delays(self, rng: random.Random) -> Iterator[float]:
        """Full-jitter delays: each uniform in [0, cap], the cap growing to ``maximum``."""
        cap = self.initial
        while True:
            yield rng.uniform(0.0, cap)
            cap = min(self.maximum, cap * self.multiplier)


def may_have_applied(error: VertexError) -> bool:
    """Whether a failed change may still have reached the server and been applied.

    Only a refusal the server gave on purpose (a 4xx other than 429) or a connection that was
    never made proves it was not: any 5xx, a 429, a timeout and a connection that broke after
    sending are all undecided until the cluster is looked up.
    """
    if isinstance(error, TransportError):
        return error.sent
    if isinstance(error, MalformedReplyError):
        return True  # the server answered, just not in a shape this code reads
    if _final(error):
        return False  # a quota or a stockout refuses before anything is done
    if isinstance(error, ResourceExhaustedError | DeadlineExceededError):
        return True
    return error.http_status >= 500


def is_retryable(error: VertexError, *, safe: bool) -> bool:
    """Whether a failed call may be tried again.

    UNAVAILABLE and a connection failure are retryable for every call; RESOURCE_EXHAUSTED,
    INTERNAL, a 5xx UNKNOWN and DEADLINE_EXCEEDED only for calls that change nothing, or once
    a look-up has shown that a change did not apply (see ``VertexClient``).
    Never: INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED,
    FAILED_PRECONDITION, ALREADY_EXISTS, ABORTED, and a quota used up or a stockout (the same
    request is refused again until the quota is raised or capacity returns).
    """
    if _final(error):
        return False
    if isinstance(error, TransportError | UnavailableError):
        return True
    if isinstance(error, MalformedReplyError):
        return False  # the same reply would come back
    transient = isinstance(error, ResourceExhaustedError | InternalError | DeadlineExceededError)
    transient = transient or (isinstance(error, UnknownError) and error.http_status >= 500)
    return transient and safe
