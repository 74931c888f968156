"""`/cluster slurm CLUSTER`: the cluster's Slurm spec in full, as the control plane holds it
(``orchestratorSpec.slurmSpec``): partitions with their pools and nodes, the default
partition, the login pool, the home directory storage, the slurm.conf ``config`` map, and
the prolog and epilog scripts, each with its first lines, size and hash."""

from __future__ import annotations

import hashlib

from handlers.domain.models import Cluster
from handlers.replies import Code, Field, Fields, Heading, Note, Reply, Strong, Table, Text

SCRIPT_LINES = 3  # the first lines shown of each prolog or epilog script


def script_digest(script: str) -> str:
    """A short, stable name for a script's content (the first 12 hex digits of its SHA-256),
    to tell two versions apart at a glance."""
    return hashlib.sha256(script.encode()).hexdigest()[:12]


def _lines(count: int) -> str:
    return f"{count} line{'' if count == 1 else 's'}"


def _scripts(reply: Reply, kind: str, scripts: list[str]) -> None:
    if not scripts:
        reply.add(Text(Strong(f"{kind.capitalize()} scripts"), ": none"))
        return
    reply.add(Text(Strong(f"{kind.capitalize()} scripts"), f" ({len(scripts)}, run in order)"))
    for number, script in enumerate(scripts, 1):
        lines = script.splitlines()
        size = len(script.encode())
        reply.add(
            Note(
                f"{kind} {number} · {_lines(len(lines))} · {size:,} bytes · sha256 ",
                Code(script_digest(script)),
            )
        )
        shown = [(line,) for line in lines[:SCRIPT_LINES]] or [("(empty)",)]
        if len(lines) > SCRIPT_LINES:
            shown.append((f"… {_lines(len(lines) - SCRIPT_LINES)} more",))
        reply.add(Table.of(("",), shown))


def slurm_reply(cluster: Cluster) -> Reply:
    slurm = cluster.slurm
    reply = Reply(summary=f"{cluster.cluster_id}: Slurm settings")
    reply.add(Heading(f"{cluster.cluster_id}: Slurm settings"))
    partitions = slurm.partitions or []
    default = slurm.default_partition  # an empty defaultPartitionId: the first partition
    default_text = (
        "none"
        if default is None
        else f"{default}{'' if slurm.default_partition_id else ' (the first partition)'}"
    )
    reply.add(
        Fields(
            (
                Field("Default partition", Code(default_text) if default else default_text),
                Field("Login pool", Code(slurm.login_node_pool_id or "?")),
                Field("Home directory storage", Code(slurm.home_directory_storage or "?")),
                Field("Partitions", str(len(partitions))),
            )
        )
    )
    rows = []
    for partition in partitions:
        pools = [cluster.pool(p) for p in partition.node_pool_ids]
        nodes = sum(cluster.nodes(p) for p in pools if p is not None)
        low = sum(p.min_nodes for p in pools if p is not None)
        high = sum(p.max_nodes for p in pools if p is not None)
        missing = [i for i, p in zip(partition.node_pool_ids, pools, strict=True) if p is None]
        names = ", ".join(partition.node_pool_ids) + (
            f" (missing: {', '.join(missing)})" if missing else ""
        )
        marker = " (default)" if partition.id == default else ""
        rows.append((partition.id + marker, names, str(nodes), f"{low}:{high}"))
    if rows:
        reply.add(
            Table.of(("PARTITION", "POOLS", "NODES", "MIN:MAX"), rows, right=frozenset({2, 3}))
        )
    config = slurm.config or {}
    if config:
        reply.add(Text(Strong("slurm.conf settings"), f" ({len(config)})"))
        reply.add(Table.of(("KEY", "VALUE"), sorted(config.items())))
    else:
        reply.add(Text(Strong("slurm.conf settings"), ": none set (Slurm's defaults)"))
    if slurm.scheduling or slurm.accounting:
        reply.add(
            Note("This cluster also has the superseded scheduling/accounting settings, kept as is.")
        )
    _scripts(reply, "prolog", slurm.prolog_bash_scripts or [])
    _scripts(reply, "epilog", slurm.epilog_bash_scripts or [])
    if slurm.prolog_bash_scripts or slurm.epilog_bash_scripts:
        cid = cluster.cluster_id
        reply.add(
            Note(
                "One script whole: ",
                Code(f"/cluster slurm {cid} prolog show N"),
                "; remove or reorder: ",
                Code("prolog remove N"),
                ", ",
                Code("prolog move N M"),
                " (epilog alike).",
            )
        )
    reply.add(Note(Code(cluster.name or ""), " · orchestratorSpec.slurmSpec"))
    return reply
