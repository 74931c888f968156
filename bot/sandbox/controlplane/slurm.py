"""slurmrestd replies as ``:callSlurmRestApi`` relays them, made from real captures.

From manage-clusters-slurm: the reply is ``{"status", "body"}`` with slurmrestd's JSON as a
string; calls run as the caller's own Linux account ("you can't run the job as another
user"), so with slurm.conf ``PrivateData=jobs`` other users' jobs are not listed, while
nodes always are; a path that is not a Slurm path is INVALID_ARGUMENT.

From slurmrestd itself (the replies in ``slurmrestd_objects.json`` and the project's test
fixtures, captured from Slurm 24.05 to 25.11): every job and node is the whole object
(128 to 135 keys for a job), copied from a real one with the fields that matter set; a data
parser the release does not ship is a ``text/plain`` 404; a job's ``nodes`` is a hostlist
(``cpu01-cpu-[0-1]``) of the node names; a pending job carries Slurm's forecast of its start.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

from bot.sandbox.controlplane import pretty, slurm_reservations, wire
from bot.sandbox.controlplane.slurm_blocked import blocked
from bot.sandbox.controlplane.slurm_more import diag_document, node_unfound, partition_documents
from bot.sandbox.controlplane.slurm_parts import (
    BUSY_JOB_STATES,
    DEFAULT_RELEASE,
    HELD_STATE_FLAGS,
    NOT_FOUND_24,
    NOT_FOUND_25,
    RELEASES,
    hostlist,
    hostnames,
    number,
    set_by_default,
    share_documents,
    slurm_int,
    states_of,
)
from bot.sandbox.controlplane.slurm_place import Placement, is_whole, place
from bot.sandbox.controlplane.slurm_update import NODE, update_node

PATH = re.compile(r"^/(slurm|slurmdb)/(v\d+\.\d+\.\d+)/(?P<rest>[A-Za-z_/0-9.-]*)$")
RESOURCES = re.compile(r"^(jobs|nodes|ping|shares|reservations|partitions|diag)/?$")
ONE_JOB = re.compile(r"^job/(\d+)/?$")
ONE_NODE = re.compile(r"^node/([^/]+)/?$")
CALLER = "clusterbot"  # the Linux account the bot's service account maps to


@cache
def _objects() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("slurmrestd_objects.json").read_text()
    parsers: dict[str, Any] = json.loads(text)["parsers"]
    pretty.freeze(parsers.values())  # shared by every document built from them, never changed
    return parsers


def _parser(version: str) -> dict[str, Any]:
    """The captured objects closest to a data parser (v0.0.38/39 as v0.0.40, v0.0.45 as
    v0.0.44: the fields set here are the same in each, but ``hold``, which v0.0.40 lacks)."""
    objects = _objects()
    if version in objects:
        return dict(objects[version])
    known = sorted(objects)
    return dict(objects[known[0] if version < known[0] else known[-1]])


def _unset() -> dict[str, Any]:
    return {"set": False, "infinite": False, "number": 0}


def _uid(user: str) -> int:
    return 10_000 + zlib.crc32(user.encode()) % 50_000


def job_document(
    cluster_id: str,
    key: int,
    job: dict[str, Any],
    now: datetime,
    version: str,
    placement: Placement,
) -> dict[str, Any]:
    """A whole JOB_INFO: a captured job of the same data parser with this job's fields."""
    if is_whole(job):
        return job
    states = states_of(job)
    if str(key) in placement.configuring:  # power_save.html: its nodes are booting
        states = ["RUNNING", "CONFIGURING"]
    running = bool(BUSY_JOB_STATES & set(states))
    epoch = int(now.timestamp())
    captured = _parser(version)
    document = dict(captured["running" if running else "pending"])
    user = str(job.get("user_name", "researcher"))
    job_id = int(job.get("job_id", 100 + key))
    held = job.get("hold") is True or bool(HELD_STATE_FLAGS & set(states))
    begin = slurm_int(job.get("begin_time"))
    submitted = epoch - int(job.get("submitted_ago", 600))
    eligible = begin if begin is not None else submitted
    waits = None if running else blocked(job, placement.states, placement.partitions)
    if not running and job.get("reservation") and not placement.active(str(job["reservation"])):
        waits = ("Reservation", "")  # node_scheduler.c 2893-2896: WAIT_RESERVATION, no desc
    reason = (
        job.get("state_reason")
        or (waits[0] if waits else None)
        or (
            "None"
            if running
            else "JobHeldUser"
            if held
            else "BeginTime"
            if begin is not None and begin > epoch
            else "Priority"
        )
    )
    nodes = placement.nodes.get(str(key), [])
    started = int(job.get("started_at", epoch - 300))
    start = started if running else max(eligible, epoch + 120)  # a forecast, as Slurm's
    limit = int(job.get("time_limit") or slurm_int(document.get("time_limit")) or 60)
    output = f"/home/{user}/slurm-{job_id}.out"
    document.update(
        job_id=job_id,
        name=str(job.get("name", f"job-{key}")),
        user_name=user,
        user_id=_uid(user),
        group_name=user,
        group_id=_uid(user),
        account=str(job.get("account", "default")),
        partition=str(job.get("partition", "default")),
        qos=str(job.get("qos", "normal")),
        cluster=cluster_id,
        job_state=states,
        state_reason=reason,
        # held jobs sit at priority 0 (the captured JobHeldUser and JobHeldAdmin jobs)
        priority=number(0 if held else int(job.get("priority", 10_000 - key))),
        node_count=number(int(job.get("node_count", 1))),
        nodes=job.get("nodes") or hostlist(nodes),
        batch_host=nodes[0] if nodes else "",
        scheduled_nodes="",
        submit_time=number(submitted),
        eligible_time=number(eligible),
        accrue_time=number(eligible if not held else 0),
        start_time=number(start) if not held else _unset(),
        end_time=number(start + limit * 60) if not held else _unset(),
        time_limit=number(limit),
        current_working_directory=f"/home/{user}",
        standard_output=output,
        standard_error=output,
        resv_name=str(job.get("reservation") or ""),
    )
    if "hold" in document:  # JOB_INFO has it from v0.0.41; 23.11's says held by its reason
        document["hold"] = held
    if (
        waits and waits[1] and reason == waits[0]
    ):  # every data parser's job has it: the why in words
        document["state_description"] = waits[1]
    if job.get("array") and not running:
        # an array's pending tasks are one meta record (the 23.11 capture's job 7725337):
        # the array's own id, no task id, the tasks still to run as a range
        document.update(
            array_job_id=number(job_id),
            array_task_id=_unset(),
            array_task_string=str(job["array"]),
        )
    if job.get("state_description"):  # as given in the short form, slurmctld's words
        document["state_description"] = str(job["state_description"])
    if running:
        document["job_resources"] = _resources(captured["running"]["job_resources"], nodes)
    return document


def _resources(template: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    resources_ = dict(template)
    allocation = (template.get("nodes") or {}).get("allocation") or [{}]
    resources_["nodes"] = dict(
        template.get("nodes") or {},
        count=len(nodes),
        list=hostlist(nodes),
        allocation=[dict(allocation[0], index=i, name=n) for i, n in enumerate(nodes)],
    )
    return resources_


def node_document(
    name: str,
    state: list[str],
    reason: str,
    partitions: list[str],
    version: str,
    now: int,
    set_by: tuple[str, int] | None = None,
) -> dict[str, Any]:
    """A whole NODE: a captured node of the same data parser with this node's fields;
    ``set_by``: who set its reason, and when (else, an hour ago, slurmctld's SlurmUser for a
    reason slurmctld sets itself, root for any other)."""
    captured = _parser(version)
    document = dict(captured["node"])
    cpus = int(document.get("cpus") or 8)
    allocated = cpus if {"ALLOCATED", "MIXED"} & set(state) else 0
    document.update(
        name=name,
        hostname=name,
        address=name,
        state=state,
        reason=reason,
        reason_set_by_user=(set_by[0] if set_by else set_by_default(reason)) if reason else "",
        reason_changed_at=number((set_by[1] if set_by else now - 3600) if reason else 0),
        partitions=partitions,
        alloc_cpus=allocated,
        alloc_idle_cpus=cpus - allocated,
        version=captured["meta"]["slurm"]["release"],
    )
    return document


def _meta(cluster_id: str, version: str, release: str) -> dict[str, Any]:
    major, minor, micro = release.split(".")
    meta: dict[str, Any] = json.loads(json.dumps(_parser(version)["meta"]))
    meta["plugin"]["data_parser"] = f"data_parser/{version}"
    meta["client"] = {"source": "[control-plane-proxy]", "user": CALLER, "group": CALLER}
    meta["slurm"] = {
        "version": {"major": major, "micro": micro, "minor": minor},
        "release": release,
        "cluster": cluster_id,
    }
    return meta


@dataclass
class Slurmrestd:
    """One cluster's slurmrestd: its release (and so its data parsers) and what it holds."""

    cluster: dict[str, Any]
    jobs: list[dict[str, Any]]
    now: datetime
    release: str = DEFAULT_RELEASE
    versions: tuple[str, ...] | None = None  # served data parsers, when set apart from a release
    private_jobs: bool = False
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    reservations: list[dict[str, Any]] = field(default_factory=list)
    booting: frozenset[str] = frozenset()  # nodes whose VM still boots

    @property
    def cluster_id(self) -> str:
        return str(self.cluster.get("name", "")).rsplit("/", 1)[-1]

    @property
    def served(self) -> tuple[str, ...]:
        return self.versions or RELEASES[self.release][1]

    def _not_found(self) -> dict[str, Any]:
        text = NOT_FOUND_24 if self.release < "25.11" else NOT_FOUND_25
        return {"status": 404, "body": text}

    def reply(self, method: str, path: str) -> dict[str, Any]:
        """The ``{"status", "body"}`` pair for one proxied request (the path is already a
        Slurm path)."""
        match = PATH.match(path)
        assert match is not None
        version = match.group(2)
        rest = match["rest"]
        if version not in self.served or match.group(1) != "slurm" or method != "HTTP_METHOD_GET":
            return self._not_found()
        resource = RESOURCES.match(rest)
        one, node = ONE_JOB.match(rest), ONE_NODE.match(rest)
        if resource is None and one is None and node is None:
            return self._not_found()
        epoch = int(self.now.timestamp())
        release = RELEASES[self.release][0]
        document: dict[str, Any] = {"meta": _meta(self.cluster_id, version, release)}
        kind = resource.group(1) if resource else "job" if one else "node"
        if kind == "ping":
            document["pings"] = [
                {"hostname": f"{self.cluster_id}-controller", "pinged": "UP", "mode": "primary"}
            ]
        elif kind == "shares":
            document["shares"] = share_documents(self.jobs, version)
        elif kind == "reservations":
            names = list(self._place().states)
            document["reservations"] = [
                slurm_reservations.document(r, hostnames(r["node_list"], names))
                for r in self.reservations
            ]
            document["last_update"] = number(epoch)
        elif kind == "partitions":
            placement = self._place()
            partitions = wire.slurm_spec(self.cluster).get("partitions") or []
            document["partitions"] = partition_documents(partitions, placement.partitions)
            document["last_update"] = number(epoch)
        elif kind == "diag":
            document["statistics"] = diag_document(self.jobs, epoch)
        elif kind in ("nodes", "node"):
            placement = self._place()
            wanted = node.group(1) if node else None
            if wanted is not None and wanted not in placement.states:
                document.update(errors=node_unfound(wanted), warnings=[])
                return {"status": 200, "body": pretty.dumps(document)}
            document["nodes"] = [
                node_document(
                    name,
                    state,
                    reason,
                    placement.partitions[name],
                    version,
                    epoch,
                    self._set_by(name),
                )
                for name, (state, reason) in placement.states.items()
                if wanted is None or name == wanted
            ]
            document["last_update"] = number(epoch)
        else:
            placement = self._place()
            visible = [
                job_document(self.cluster_id, key, job, self.now, version, placement)
                for key, job in enumerate(self.jobs)
                if not self.private_jobs or job.get("user_name") == CALLER
            ]
            if one is not None:
                visible = [j for j in visible if slurm_int(j.get("job_id")) == int(one.group(1))]
                if not visible:
                    return self._unknown_job(document, one.group(1))
            document["jobs"] = visible
            document["last_backfill"] = number(epoch - 30)
            document["last_update"] = number(epoch)
        document.update(errors=[], warnings=[])
        return {"status": 200, "body": pretty.dumps(document)}

    def _place(self) -> Placement:
        now = self.now.timestamp()
        return place(
            self.cluster,
            self.jobs,
            self.sizes,
            self.overrides,
            self.reservations,
            now,
            self.booting,
        )

    def _set_by(self, node: str) -> tuple[str, int] | None:
        """Who set the node's reason through a node update, and when."""
        override = self.overrides.get(node) or {}
        return (str(override["by"]), int(override.get("at") or 0)) if override.get("by") else None

    def update(self, path: str, message: dict[str, Any]) -> tuple[dict[str, Any], str, Any]:
        """A node update (``POST node/NAME``): the reply, the node, and its new override
        (None: unchanged); a path that is not one is slurmrestd's 404."""
        match = PATH.match(path)
        assert match is not None
        version, node = match.group(2), NODE.match(match["rest"])
        if version not in self.served or match.group(1) != "slurm" or node is None:
            return self._not_found(), "", None
        meta = _meta(self.cluster_id, version, RELEASES[self.release][0])
        placement = self._place()
        name = node.group(1)
        now = placement.states.get(name)
        epoch = int(self.now.timestamp())
        reply, changed = update_node(meta, name, now, message, CALLER, epoch)
        return reply, name, changed

    def _unknown_job(self, document: dict[str, Any], job_id: str) -> dict[str, Any]:
        """As captured (Slurm-web slurm-job-unfound.json): a JSON 404 with an empty list."""
        error = {
            "description": f"Unable to query JobId={job_id}",
            "error_number": 2017,
            "error": "Invalid job id specified",
            "source": "_handle_job_get",
        }
        document.update(jobs=[], errors=[error], warnings=[])
        return {"status": 404, "body": pretty.dumps(document)}
