"""``/cluster node CLUSTER NODE [resume | drain REASON…]``: one Slurm node as slurmrestd lists
it now, or a request to return it to service or drain it with a reason (a second person
approves; the card is posted in the channel). ``node CLUSTER NODE drain`` with no reason
opens a form that asks for one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from handlers.changes.plan import PlanError
from handlers.domain.errors import SlurmUnreadableError
from handlers.forms.asks import FormAsk, FormKind
from handlers.grammar import NODE_NAME, CommandError, arity, cluster_word, echo
from handlers.policy import Role
from handlers.replies import notice

if TYPE_CHECKING:
    from handlers.commands import Caller
    from handlers.desk import Desk
    from handlers.replies import Reply

NODE = (
    "one Slurm node now; ask to resume it, or to drain it with a reason (a second person approves)"
)
VERBS = ("resume", "drain")


@dataclass(frozen=True)
class NodeCommand:
    cluster: str
    node: str
    verb: str | None = None  # None: show it
    reason: str = ""  # drain's

    @property
    def subcommand(self) -> str:
        return "node"


def parse_node(args: list[str]) -> NodeCommand:
    arity(args, "node", 2, 64)
    cluster = cluster_word(args[0], "node")
    if not NODE_NAME.match(args[1]):
        raise CommandError(f"{echo(args[1])} is not a Slurm node name", "node")
    if len(args) == 2:
        return NodeCommand(cluster, args[1])
    verb = args[2].lower()
    if verb not in VERBS:
        raise CommandError(f"a node can be resumed or drained, not {echo(args[2])}", "node")
    reason = " ".join(args[3:])
    if verb == "resume" and reason:
        raise CommandError("resume takes no reason: Slurm clears the node's", "node")
    if verb == "drain" and not reason:
        raise CommandError("drain needs a reason: Slurm keeps it on the node", "node")
    return NodeCommand(cluster, args[1], verb, reason)


def node_role(command: NodeCommand) -> Role:
    """Reading a node is a viewer's; asking to change it an operator's."""
    return Role.VIEWER if command.verb is None else Role.OPERATOR


def node_form(args: list[str]) -> FormAsk | None:
    """``node CLUSTER NODE drain``: the reason, in a form."""
    if len(args) != 3 or args[2].lower() != "drain" or not NODE_NAME.match(args[1]):
        return None
    try:
        return FormAsk(FormKind.DRAIN, cluster_word(args[0], "node"), which=args[1])
    except CommandError:
        return None


async def run_node(services: Desk, command: NodeCommand, caller: Caller) -> Reply | None:
    if services.health is None:
        return notice("Node", "This clusterbot reads no Slurm nodes.")
    if command.verb is None:
        return await services.health.show(command.cluster, command.node)
    drain = command.verb == "drain"
    try:
        request = await services.health.ask(
            caller.user, caller.channel, command.cluster, command.node, drain, command.reason
        )
    except PlanError as error:
        raise CommandError(str(error), "node") from None
    except SlurmUnreadableError as error:
        raise CommandError(f"Slurm could not be read: {error.reason}", "node") from None
    return await services.approvals.card_pending(request)  # the card is the answer
