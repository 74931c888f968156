"""What to tell a person whose request Google refused for want of something: a quota used
up, no capacity, a rate limit, or a shortage Google did not explain (``handlers.domain.shortage``).
"""

from __future__ import annotations

from handlers.domain.errors import VertexError
from handlers.domain.shortage import QUOTAS_PAGE, Shortage, shortage_of


def shortage_advice(error: VertexError) -> str | None:
    """Advice for a refusal that says something is short, or None for any other error."""
    said = shortage_of(error)
    if said is None:
        return None
    if said.kind == Shortage.QUOTA:
        metric = ", ".join(said.metrics) or "a quota it did not name"
        return (
            f"the project's quota is used up ({metric}); the same request is refused until "
            f"it is raised: ask for more at {QUOTAS_PAGE}, or choose another machine type or "
            "region"
        )
    if said.kind == Shortage.STOCKOUT:
        where = f" in {said.region}" if said.region else ""
        offered = f"; it offers {', '.join(said.elsewhere)}" if said.elsewhere else ""
        return (
            f"Google has no capacity for these machines{where} now{offered}: choose another "
            "region, zone or machine type, or ask again later"
        )
    if said.kind == Shortage.RATE:
        return "the control plane is rate limiting; try again in a minute"
    return (
        "the control plane says something is used up without saying what (not a quota or a "
        "capacity it names)"
    )
