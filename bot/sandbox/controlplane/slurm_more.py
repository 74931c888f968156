"""The rest of slurmctld's read side the simulator answers: ``partitions/``, ``diag/`` and
``node/NAME``, each from a real reply (``slurmrestd_more.json``: Slurm 23.11.1's
data_parser/v0.0.40, as a Prometheus exporter keeps them; the nodes' own template is the
data parser's) with the cluster's own names and counts.

- PARTITION_INFO: a partition per ``slurmSpec.partitions`` entry, its nodes the hostlist of
  the cluster's node names in it, ``partition.state`` UP;
- STATS_MSG (``diag``): the captured statistics with this queue's pending and running jobs
  and the request's time;
- ``node/NAME`` of a node the cluster does not have: HTTP 200 with slurmrestd's own error
  entry and no ``nodes`` (Slurm-web's 24.11 capture slurm-node-unfound.json).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

from bot.sandbox.controlplane.slurm_parts import BUSY_JOB_STATES, hostlist, number, states_of


@cache
def _templates() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("slurmrestd_more.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def partition_documents(
    partitions: list[dict[str, Any]], nodes: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """Each of the cluster's partitions as PARTITION_INFO; ``nodes``: node -> partitions."""
    found = []
    for partition in partitions:
        name = str(partition.get("id") or "")
        mine = sorted(n for n, names in nodes.items() if name in names)
        document = copy.deepcopy(_templates()["partition"])
        cpus = 8 * len(mine)
        document["name"] = name
        document["nodes"] = {
            "allowed_allocation": "",
            "configured": hostlist(mine),
            "total": len(mine),
        }
        document["cpus"]["total"] = cpus
        document["tres"]["configured"] = f"cpu={cpus},node={len(mine)},billing={cpus}"
        document["qos"]["assigned"] = ""
        document["partition"] = {"state": ["UP"]}
        found.append(document)
    return found


def diag_document(jobs: list[dict[str, Any]], epoch: int) -> dict[str, Any]:
    """slurmctld's statistics with this queue's counts, as of ``epoch``."""
    statistics: dict[str, Any] = copy.deepcopy(_templates()["statistics"])
    running = sum(bool(BUSY_JOB_STATES & set(states_of(j))) for j in jobs)
    statistics.update(
        jobs_running=running,
        jobs_pending=len(jobs) - running,
        req_time=number(epoch),
        req_time_start=number(epoch - epoch % 86400),
        job_states_ts=number(epoch - 10),
    )
    return statistics


def node_unfound(name: str) -> list[dict[str, Any]]:
    return [
        {
            "description": f"Failure to query node {name}",
            "error_number": 0,
            "error": "No error",
            "source": "_dump_nodes",
        }
    ]
