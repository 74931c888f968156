"""The approval card and its thread message, each redrawn from the request at every state."""

from __future__ import annotations

from datetime import UTC, datetime

from handlers.costs import PRICES_AS_OF, Range, money, money_range
from handlers.entities import ApprovalRequest, RequestState
from handlers.plans import ChangePlan, PlanKind
from handlers.replies import (
    Button,
    Buttons,
    Confirm,
    Fields,
    Heading,
    Note,
    Reply,
    Rule,
    Table,
    Text,
    escape,
    mention,
)


def slack_time(epoch: float) -> str:
    """A time that Slack shows in the reader's time zone, with a UTC fallback."""
    fallback = datetime.fromtimestamp(epoch, UTC).strftime("%H:%M UTC")
    return f"<!date^{int(epoch)}^{{time}}|{fallback}>"


def _diff(plan: ChangePlan) -> Table:
    rows = [f"{'POOL':<10} {'MACHINE':<34} {'NODES':>13} {'$/H BEFORE':>12} {'$/H AFTER':>14}"]
    for change in plan.pools:
        if change.changed:
            nodes = f"{change.bounds_before} -> {change.bounds_after}"
            after = Range(change.cost_after, change.cost_after_high or change.cost_after)
        else:
            nodes = f"{change.bounds_after} (same)"
            after = Range(change.cost_after, change.cost_after)
        rows.append(
            f"{change.pool_id:<10} {change.machine:<34} {nodes:>13} "
            f"{money(change.cost_before, per_hour=False):>12} "
            f"{money_range(after, per_hour=False):>14}"
        )
    return Table(tuple(escape(r) for r in rows))


def _delta(plan: ChangePlan) -> str:
    delta = plan.cost_delta
    if not delta.known:
        return "unknown"
    assert delta.low is not None and delta.high is not None
    if delta.fixed:
        return money(delta.low, signed=True)
    return f"{money(delta.low, signed=True, per_hour=False)} to {money(delta.high, signed=True)}"


def _status(request: ApprovalRequest) -> str | None:
    by = mention(request.decided_by) if request.decided_by else "someone"
    outcome = escape(request.outcome or "")
    state = request.state
    if state in (RequestState.PENDING, RequestState.DRAFT):
        return None
    if state in (RequestState.APPROVED, RequestState.EXECUTING):
        return f"*Approved* by {by}; sending the change to the control plane"
    if state == RequestState.RUNNING:
        return f"*Approved* by {by}; the change is under way, progress in the thread"
    if state == RequestState.SUCCEEDED:
        return f"*Done*: approved by {by}; {outcome}"
    if state == RequestState.FAILED:
        return f"*Failed*: approved by {by}; {outcome}"
    if state == RequestState.REFUSED:
        return f"*Not applied*: approved by {by}, but {outcome}"
    if state == RequestState.UNKNOWN:
        return (
            f"*Outcome unknown*: approved by {by}, but {outcome}. Check the cluster with "
            f"`/cluster show {escape(request.plan.cluster_id)}` before asking again."
        )
    if state == RequestState.REJECTED:
        return f"*Rejected* by {by}"
    if state == RequestState.WITHDRAWN:
        return f"*Withdrawn* by {mention(request.requester)}"
    if state == RequestState.ABANDONED:
        return "*Interrupted*: clusterbot stopped before this request was recorded; ask again"
    return f"*Expired*: nobody approved it by {slack_time(request.expires_at)}"


def request_card(request: ApprovalRequest) -> Reply:
    plan = request.plan
    cluster = escape(plan.cluster_id)
    target = "/".join(plan.cluster.split("/")[1:4:2])
    if plan.kind == PlanKind.DELETE:
        title = f"Delete request: {plan.cluster_id}"
        ask = (
            f"{mention(request.requester)} asks to *delete* cluster *{cluster}* "
            f"(`{escape(target)}`)."
        )
    else:
        changed = ", ".join(c.pool_id for c in plan.changed_pools)
        title = f"Resize request: {plan.cluster_id} / {changed}"
        ask = f"{mention(request.requester)} asks to resize *{cluster}* (`{escape(target)}`)."
    shown = RequestState.PENDING if request.state == RequestState.DRAFT else request.state
    reply = Reply(summary=f"{title} ({shown})", public=True)
    reply.add(Heading(title[:150]), Text(ask))
    if plan.kind == PlanKind.DELETE:
        reply.add(
            Text("*This will remove*\n" + "\n".join(f"• {escape(loss)}" for loss in plan.losses))
        )
        if plan.kept:
            reply.add(Text("*Kept*\n" + "\n".join(f"• {escape(item)}" for item in plan.kept)))
    else:
        reply.add(
            Text("\n".join(f"• {escape(c.words)}" for c in plan.changed_pools)),
            _diff(plan),
        )
    for warning in plan.warnings:
        reply.add(Text(f":warning: {escape(warning)}"))
    reply.add(
        Fields(
            (
                f"*Cost before*\n{money(plan.cost_before)}",
                f"*Cost after*\n{money_range(plan.after)}",
                f"*Change*\n{_delta(plan)}",
                f"*Expires*\n{slack_time(request.expires_at)}"
                if request.state in (RequestState.PENDING, RequestState.DRAFT)
                else f"*Requested*\n{slack_time(request.created_at)}",
            )
        )
    )
    mask = f"updateMask `{','.join(plan.update_mask)}` · " if plan.update_mask else ""
    reply.add(
        Note(
            f"{mask}request `{escape(request.id)}` · "
            f"costs are estimates (list prices {PRICES_AS_OF})"
        )
    )
    status = _status(request)
    if status is None:
        approve_confirm = None
        if plan.kind == PlanKind.DELETE:
            approve_confirm = Confirm(
                title=f"Delete {plan.cluster_id}?",
                text=f"This deletes *{cluster}* and everything listed on the card. "
                "It cannot be undone.",
                confirm="Delete",
                deny="Cancel",
                danger=True,
            )
        reply.add(
            Rule(),
            Buttons(
                (
                    Button(
                        "approve",
                        "Approve delete" if plan.kind == PlanKind.DELETE else "Approve",
                        request.id,
                        style="danger" if plan.kind == PlanKind.DELETE else "primary",
                        confirm=approve_confirm,
                    ),
                    Button("reject", "Reject", request.id),
                    Button("withdraw", "Withdraw", request.id),
                ),
                block_id=f"decide:{request.id}",
            ),
            Note("Approve and Reject are for approvers; Withdraw is for the requester."),
        )
    else:
        reply.add(Rule(), Text(status))
    return reply


def thread_reply(cluster_id: str, text: str, note: str | None = None) -> Reply:
    """The one message in a card's thread: progress while it runs, then how it ended."""
    reply = Reply(f"{cluster_id}: {text}", public=True).add(
        Text(f"*{escape(cluster_id)}*: {escape(text)}")
    )
    if note:
        reply.add(Note(note))
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
