"""The drain form: ``/cluster node CLUSTER NODE drain`` with no reason asks for one, since
Slurm keeps the reason on the node for everyone (scontrol(1): a reason is required to drain)."""

from __future__ import annotations

from handlers.forms.choices import Forms
from handlers.forms.model import Ask, Form, FormField
from handlers.forms.spec import Checked, Filled, FormKindSpec
from handlers.forms.views import ASK
from handlers.health.commands import DRAIN_KIND, NodeCommand
from handlers.health.kinds import MAX_REASON
from handlers.replies import Note, Strong, Text


class DrainForm(FormKindSpec):
    kind = DRAIN_KIND
    subcommand = "node"
    title = "Drain a Slurm node"
    last = "reason"

    def drawn(self, forms: Forms, filled: Filled) -> Form:
        node = filled.state.which or "?"
        return Form(filled.state, self.title, ASK).add(
            Text("Drain ", Strong(node), " of ", Strong(filled.cluster.cluster_id), "."),
            FormField(
                "reason", "Reason (Slurm keeps it on the node)", Ask.LINE, max_length=MAX_REASON
            ),
            Note("No new job starts on it; its jobs run to their end. A second person approves."),
        )

    def command(self, forms: Forms, filled: Filled) -> Checked:
        reason = " ".join((filled.text("reason") or "").split())
        if not reason:
            return None, {"reason": "a drain needs a reason"}
        cluster = filled.cluster
        node = filled.state.which or ""
        return NodeCommand(cluster.name or cluster.cluster_id, node, "drain", reason), {}


DRAIN_FORM = DrainForm()
