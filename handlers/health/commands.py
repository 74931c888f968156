"""``/cluster node CLUSTER NODE [resume | drain REASON…]``: one Slurm node as slurmrestd lists
it now, or a request to return it to service or drain it with a reason (a second person
approves; the card is posted in the channel). ``node CLUSTER NODE drain`` with no reason
opens a form that asks for one.
"""

from __future__ import annotations

from dataclasses import dataclass

from handlers.forms.asks import FormAsk
from handlers.grammar import NODE_NAME, CommandError, arity, cluster_word, echo
from handlers.policy import Role

NODE_USAGE = "/cluster node CLUSTER NODE [resume | drain REASON…]"

NODE = (
    "one Slurm node now; ask to resume it, or to drain it with a reason (a second person approves)"
)
VERBS = ("resume", "drain")
DRAIN_KIND = "drain"  # the form of a Slurm node's drain, with its reason


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
    arity(args, NODE_USAGE, 2, 64)
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
        return FormAsk(DRAIN_KIND, cluster_word(args[0], "node"), which=args[1])
    except CommandError:
        return None
