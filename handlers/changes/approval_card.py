"""The approval card and its thread message, each redrawn from the request at every state."""

from __future__ import annotations

from typing import Any

from handlers.actions import Decide, Withdraw
from handlers.changes.kinds import kind_of
from handlers.changes.plan import ChangePlan
from handlers.costs import PRICES_AS_OF, money, money_range
from handlers.entities import ApprovalRequest, RequestState
from handlers.reading.clusters import console_link
from handlers.replies import (
    Button,
    Buttons,
    Caution,
    Code,
    Field,
    Fields,
    Heading,
    Line,
    Note,
    Reply,
    Rule,
    Strong,
    Text,
    Time,
    UserRef,
)


def cost_change(plan: ChangePlan[Any]) -> str:
    """The change in cost: one signed figure, or a range for a MIN:MAX change."""
    delta = plan.cost_delta
    if not delta.known:
        return "unknown"
    assert delta.low is not None and delta.high is not None
    if delta.fixed:
        return money(delta.low, signed=True)
    return f"{money(delta.low, signed=True, per_hour=False)} to {money(delta.high, signed=True)}"


def _status(request: ApprovalRequest) -> Line | None:
    by = UserRef(request.decided_by) if request.decided_by else "someone"
    outcome = request.outcome or ""
    state = request.state
    if state in (RequestState.PENDING, RequestState.DRAFT):
        return None
    if state in (RequestState.APPROVED, RequestState.EXECUTING):
        return (Strong("Approved"), " by ", by, "; sending the change to the control plane")
    if state == RequestState.RUNNING:
        return (Strong("Approved"), " by ", by, "; the change is under way, progress in the thread")
    if state == RequestState.SUCCEEDED:
        return (Strong("Done"), ": approved by ", by, f"; {outcome}")
    if state == RequestState.FAILED:
        return (Strong("Failed"), ": approved by ", by, f"; {outcome}")
    if state == RequestState.REFUSED:
        return (Strong("Not applied"), ": approved by ", by, f", but {outcome}")
    if state == RequestState.UNKNOWN:
        return (
            Strong("Outcome unknown"),
            ": approved by ",
            by,
            f", but {outcome}. Check the cluster with ",
            Code(f"/cluster show {request.plan.cluster_id}"),
            " before asking again.",
        )
    if state == RequestState.REJECTED:
        return (Strong("Rejected"), " by ", by)
    if state == RequestState.WITHDRAWN:
        return (Strong("Withdrawn"), " by ", UserRef(request.requester))
    if state == RequestState.ABANDONED:
        return (
            Strong("Interrupted"),
            ": clusterbot stopped before this request was recorded; ask again",
        )
    return (Strong("Expired"), ": nobody approved it by ", Time(request.expires_at))


CARD = "card"  # the kind of the owed work that posts a card (``handlers/changes/preapproved``)


def card_key(request_id: str) -> str:
    """The key a request's card is posted with (and owed under, when it is owed): a card a
    crash cut off before its record is found by it."""
    return f"card:{request_id}"


def request_card(request: ApprovalRequest) -> Reply:
    plan = request.plan
    kind = kind_of(plan)
    title = kind.title(plan)
    shown = RequestState.PENDING if request.state == RequestState.DRAFT else request.state
    reply = Reply(summary=f"{title} ({shown})", public=True)
    reply.add(Heading(title[:150]), Text(UserRef(request.requester), *kind.ask(plan)))
    reply.add(*kind.card(plan))
    for warning in plan.warnings:
        reply.add(Text(Caution(), warning))
    waiting = request.state in (RequestState.PENDING, RequestState.DRAFT)
    reply.add(
        Fields(
            (
                Field("Cost before", money(plan.cost_before)),
                Field("Cost after", money_range(plan.after)),
                Field("Change", cost_change(plan)),
                Field("Expires", Time(request.expires_at))
                if waiting
                else Field("Requested", Time(request.created_at)),
            )
        )
    )
    mask: Line = (
        ("updateMask ", Code(",".join(plan.update_mask)), " · ") if plan.update_mask else ()
    )
    reply.add(
        Note(
            *mask,
            "request ",
            Code(request.id),
            f" · costs are estimates (list prices {PRICES_AS_OF}) · ",
            console_link(plan.cluster),
        )
    )
    status = _status(request)
    if status is not None:
        return reply.add(Rule(), Text(*status), *kind.finished(request))
    label, style, confirm = kind.approve(plan)
    return reply.add(
        Rule(),
        Buttons(
            (
                Button(Decide(request.id, approve=True), label, style=style, confirm=confirm),
                Button(Decide(request.id, approve=False), "Reject"),
                Button(Withdraw(request.id), "Withdraw"),
            ),
        ),
        Note("Approve and Reject are for approvers; Withdraw is for the requester."),
    )


def thread_reply(cluster_id: str, text: str, note: Line = ()) -> Reply:
    """The one message in a card's thread: progress while it runs, then how it ended."""
    reply = Reply(f"{cluster_id}: {text}", public=True).add(Text(Strong(cluster_id), f": {text}"))
    if note:
        reply.add(Note(*note))
    return reply


def ending_text(request: ApprovalRequest) -> str:
    """How an executed request ended, for its thread message."""
    outcome = request.outcome or ""
    cluster = request.plan.cluster_id
    texts = {
        RequestState.SUCCEEDED: f"done, {outcome}",
        RequestState.FAILED: outcome,
        RequestState.REFUSED: f"not applied: {outcome}",
        RequestState.UNKNOWN: (
            f"outcome unknown: {outcome}. Check it with /cluster show {cluster} before asking "
            "again."
        ),
    }
    return texts.get(request.state, str(request.state))


# how a request ended, as its requester is told (mentioned, so Slack notifies them)
ENDED_WORDS = {
    RequestState.SUCCEEDED: "is done",
    RequestState.FAILED: "failed",
    RequestState.REFUSED: "was not applied",
    RequestState.UNKNOWN: "ended with its outcome unknown",
    RequestState.REJECTED: "was rejected",
    RequestState.WITHDRAWN: "was withdrawn",
    RequestState.EXPIRED: "expired: nobody approved it in time",
}


def ending_mention(request: ApprovalRequest) -> Reply:
    """A new thread reply that mentions the requester: an edit does not notify anyone, so how
    a request ended is told in a message of its own."""
    words = ENDED_WORDS[request.state]
    cluster = request.plan.cluster_id
    what = f"{request.plan.kind.replace('_', ' ')} of {cluster}"
    line: Line = (UserRef(request.requester), f" your request {request.id} ({what}) {words}")
    if request.state == RequestState.REJECTED and request.decided_by:
        line = (*line, " by ", UserRef(request.decided_by))
    if request.state in (RequestState.SUCCEEDED, RequestState.FAILED) and request.outcome:
        line = (*line, f": {request.outcome}")
    return Reply(f"{cluster}: your request {words}", public=True).add(Text(*line, "."))
