"""The approval card: one message per change request, redrawn from the request at each state."""

from __future__ import annotations

from datetime import UTC, datetime

from handlers.costs import PRICES_AS_OF, money
from handlers.plans import ChangePlan
from handlers.records import ApprovalRequest, RequestState
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


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _diff(plan: ChangePlan) -> Table:
    rows = [f"{'POOL':<10} {'MACHINE':<34} {'NODES':>13} {'$/H BEFORE':>12} {'$/H AFTER':>12}"]
    for change in plan.pools:
        machine = change.machine
        if change.changed:
            before = f"{change.min_before}:{change.max_before}"
            after = f"{change.min_after}:{change.max_after}"
            if change.min_before == change.max_before and change.min_after == change.max_after:
                before, after = str(change.min_before), str(change.min_after)
            nodes = f"{before} -> {after}"
        else:
            nodes = f"{change.min_after} (same)"
        rows.append(
            f"{change.pool_id:<10} {machine:<34} {nodes:>13} "
            f"{money(change.cost_before, per_hour=False):>12} "
            f"{money(change.cost_after, per_hour=False):>12}"
        )
    return Table(tuple(escape(r) for r in rows))


def _status(request: ApprovalRequest) -> str | None:
    by = mention(request.decided_by) if request.decided_by else "someone"
    outcome = escape(request.outcome or "")
    state = request.state
    if state == RequestState.PENDING:
        return None
    if state == RequestState.APPROVED:
        return f"*Approved* by {by}; sending the change to the control plane"
    if state == RequestState.RUNNING:
        return f"*Approved* by {by}; operation running, progress in the thread"
    if state == RequestState.SUCCEEDED:
        return f"*Done*: approved by {by}; {outcome}"
    if state == RequestState.FAILED:
        return f"*Failed*: approved by {by}; {outcome}"
    if state == RequestState.REFUSED:
        return f"*Not applied*: approved by {by}, but {outcome}"
    if state == RequestState.REJECTED:
        return f"*Rejected* by {by}"
    return f"*Expired*: nobody approved it by {slack_time(request.expires_at)}"


def request_card(request: ApprovalRequest) -> Reply:
    plan = request.plan
    cluster = escape(plan.cluster_id)
    target = "/".join(plan.cluster.split("/")[1:4:2])
    if plan.kind == "delete":
        title = f"Delete request: {plan.cluster_id}"
        ask = (
            f"{mention(request.requester)} asks to *delete* cluster *{cluster}* "
            f"(`{escape(target)}`)."
        )
    else:
        changed = ", ".join(c.pool_id for c in plan.pools if c.changed)
        title = f"Resize request: {plan.cluster_id} / {changed}"
        ask = f"{mention(request.requester)} asks to resize *{cluster}* (`{escape(target)}`)."
    reply = Reply(summary=f"{title} ({request.state})", public=True)
    reply.add(Heading(title[:150]), Text(ask))
    if plan.kind == "delete":
        reply.add(
            Text("*This will remove*\n" + "\n".join(f"• {escape(loss)}" for loss in plan.losses))
        )
        if plan.kept:
            reply.add(Text("*Kept*\n" + "\n".join(f"• {escape(item)}" for item in plan.kept)))
    else:
        reply.add(_diff(plan))
    reply.add(
        Fields(
            (
                f"*Cost before*\n{money(plan.cost_before)}",
                f"*Cost after*\n{money(plan.cost_after)}",
                f"*Change*\n{money(plan.cost_delta, signed=True)}",
                f"*Expires*\n{slack_time(request.expires_at)}"
                if request.state == RequestState.PENDING
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
        if plan.kind == "delete":
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
                        "Approve delete" if plan.kind == "delete" else "Approve",
                        request.id,
                        style="danger" if plan.kind == "delete" else "primary",
                        confirm=approve_confirm,
                    ),
                    Button("reject", "Reject", request.id),
                ),
                block_id=f"decide:{request.id}",
            ),
        )
    else:
        reply.add(Rule(), Text(status))
    return reply
