"""The approval card and its thread message, each redrawn from the request at every state."""

from __future__ import annotations

from collections.abc import Sequence

from handlers.actions import Decide, RestoreClicked, Withdraw
from handlers.clusters import console_link
from handlers.costs import PRICES_AS_OF, Range, money, money_range
from handlers.entities import ApprovalRequest, RequestState
from handlers.plans import ChangePlan, PlanKind
from handlers.replies import (
    Button,
    Buttons,
    Caution,
    Code,
    Confirm,
    Field,
    Fields,
    Heading,
    Line,
    Note,
    Part,
    Reply,
    Rule,
    Strong,
    Table,
    Text,
    Time,
    UserRef,
)
from handlers.restore import restore_parts
from handlers.slurm_settings import meaning


def _diff(plan: ChangePlan) -> Table:
    rows = []
    for change in plan.pools:
        if change.changed:
            nodes = f"{change.bounds_before} -> {change.bounds_after}"
            after = Range(change.cost_after, change.cost_after_high or change.cost_after)
        else:
            nodes = f"{change.bounds_after} (same)"
            after = Range(change.cost_after, change.cost_after)
        rows.append(
            (
                change.pool_id,
                change.machine,
                nodes,
                money(change.cost_before, per_hour=False),
                money_range(after, per_hour=False),
            )
        )
    titles = ("POOL", "MACHINE", "NODES", "$/H BEFORE", "$/H AFTER")
    return Table.of(titles, rows, right=frozenset({2, 3, 4}))


def _settings(plan: ChangePlan) -> list[Part]:
    """slurm.conf keys before and after, and what each known key does."""
    rows = [(c.key, c.before or "(not set)", c.after or "(unset)") for c in plan.settings]
    parts: list[Part] = [Table.of(("KEY", "BEFORE", "AFTER"), rows)]
    for change in plan.settings:
        known = meaning(change.key)
        if known:
            parts.append(Note(Code(change.key), f": {known}"))
    parts.append(
        Note("The whole slurm.conf map is sent (updateMask replaces it); other keys are kept.")
    )
    return parts


def _layout(plan: ChangePlan) -> list[Part]:
    """Every partition, the default partition and the login pool, before and after."""
    assert plan.layout is not None
    parts: list[Part] = [Table.of(("", "BEFORE", "AFTER"), plan.layout.rows())]
    if plan.layout.mask.endswith(".partitions"):
        parts.append(
            Note(
                "The whole partition list is sent (updateMask replaces it); every other "
                "partition is kept as it is, and the first stays first."
            )
        )
    return parts


def cost_change(plan: ChangePlan) -> str:
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


# the card's title and what a Slurm change is said to change
SLURM_ASKS = {
    PlanKind.SLURM_CONFIG: ("Slurm settings request", "the slurm.conf settings"),
    PlanKind.SLURM_LAYOUT: ("Slurm partitions request", "the partitions or login pool"),
    PlanKind.SLURM_SCRIPTS: ("Slurm scripts request", "the prolog or epilog scripts"),
}


def _bullets(items: Sequence[str]) -> str:
    return "\n".join(f"• {item}" for item in items)


def request_card(request: ApprovalRequest) -> Reply:
    plan = request.plan
    target = "/".join(plan.cluster.split("/")[1:4:2])
    asker = UserRef(request.requester)
    if plan.kind == PlanKind.DELETE:
        title = f"Delete request: {plan.cluster_id}"
        ask: Line = (
            asker,
            " asks to ",
            Strong("delete"),
            " cluster ",
            Strong(plan.cluster_id),
            " (",
            Code(target),
            ").",
        )
    elif plan.kind == PlanKind.RESTORE:
        title = f"Restore request: {plan.cluster_id}"
        ask = (asker, " asks to create ", Strong(plan.cluster_id), " again (", Code(target), ").")
    elif plan.kind in SLURM_ASKS:
        heading, what = SLURM_ASKS[plan.kind]
        title = f"{heading}: {plan.cluster_id}"
        ask = (
            asker,
            f" asks to change {what} of ",
            Strong(plan.cluster_id),
            " (",
            Code(target),
            ").",
        )
    else:
        changed = ", ".join(c.pool_id for c in plan.changed_pools)
        title = f"Resize request: {plan.cluster_id} / {changed}"
        ask = (asker, " asks to resize ", Strong(plan.cluster_id), " (", Code(target), ").")
    shown = RequestState.PENDING if request.state == RequestState.DRAFT else request.state
    reply = Reply(summary=f"{title} ({shown})", public=True)
    reply.add(Heading(title[:150]), Text(*ask))
    if plan.kind == PlanKind.DELETE:
        reply.add(Text(Strong("This will remove"), "\n" + _bullets(plan.losses)))
        if plan.kept:
            reply.add(Text(Strong("Kept"), "\n" + _bullets(plan.kept)))
    elif plan.kind == PlanKind.SLURM_CONFIG:
        reply.add(Text(_bullets([c.words for c in plan.settings])), *_settings(plan))
    elif plan.layout is not None:
        reply.add(Text(_bullets([plan.layout.words])), *_layout(plan))
    elif plan.kind == PlanKind.RESTORE:
        reply.add(*restore_parts(plan))
    elif plan.scripts is not None:
        rows = plan.scripts.rows()
        reply.add(
            Text(_bullets([plan.scripts.words])),
            Table.of(("#", "BEFORE (sha256, first line)", "AFTER"), rows),
            Note("The whole list is sent (updateMask replaces it), each script as it is now."),
        )
    else:
        reply.add(Text(_bullets([c.words for c in plan.changed_pools])), _diff(plan))
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
        reply.add(Rule(), Text(*status))
        if plan.kind == PlanKind.DELETE and request.state == RequestState.SUCCEEDED:
            reply.add(
                Buttons(
                    (Button(RestoreClicked(request.id), "Restore"),),
                    block_id=f"restore:{request.id}",
                ),
                Note(
                    "Its spec was kept before the delete: Restore (or ",
                    Code(f"/cluster restore {plan.cluster_id}"),
                    ") asks to create it again.",
                ),
            )
        return reply
    approve_confirm = None
    if plan.kind == PlanKind.DELETE:
        approve_confirm = Confirm(
            title=f"Delete {plan.cluster_id}?",
            text=(
                "This deletes ",
                Strong(plan.cluster_id),
                " and everything listed on the card. It cannot be undone.",
            ),
            confirm="Delete",
            deny="Cancel",
            danger=True,
        )
    deleting = plan.kind == PlanKind.DELETE
    return reply.add(
        Rule(),
        Buttons(
            (
                Button(
                    Decide(request.id, approve=True),
                    "Approve delete" if deleting else "Approve",
                    style="danger" if deleting else "primary",
                    confirm=approve_confirm,
                ),
                Button(Decide(request.id, approve=False), "Reject"),
                Button(Withdraw(request.id), "Withdraw"),
            ),
            block_id=f"decide:{request.id}",
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
    what = f"{request.plan.kind.value.replace('_', ' ')} of {cluster}"
    line: Line = (UserRef(request.requester), f" your request {request.id} ({what}) {words}")
    if request.state == RequestState.REJECTED and request.decided_by:
        line = (*line, " by ", UserRef(request.decided_by))
    if request.state in (RequestState.SUCCEEDED, RequestState.FAILED) and request.outcome:
        line = (*line, f": {request.outcome}")
    return Reply(f"{cluster}: your request {words}", public=True).add(Text(*line, "."))
