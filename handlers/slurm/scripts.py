"""Prolog and epilog scripts: the whole of one on request, and adding, replacing, removing or
reordering them through approval.

From the REST reference: ``prolog_bash_scripts`` and ``epilog_bash_scripts`` are repeated
fields with update-mask paths of their own, replaced whole, run at every job's start or end in
list order. A change is planned against each script's content hash, so the PATCH built on the
fresh read sends every script as read; a script that changed meanwhile stops the change. A new
script (added, or replacing one) travels in the plan whole.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from handlers.domain.models import Cluster
from handlers.replies import Code, Heading, Note, Reply, Table, Text
from handlers.slurm.settings import slurm_copy
from handlers.slurm.view import script_digest

SLURM = "orchestrator_spec.slurm_spec"


class ScriptAction(StrEnum):
    REMOVE = "remove"
    MOVE = "move"
    ADD = "add"
    REPLACE = "replace"


class ScriptError(ValueError):
    """The change cannot be made; the message is meant for the user."""


class ScriptView(BaseModel):
    model_config = ConfigDict(frozen=True)

    digest: str
    first_line: str
    size: int

    @classmethod
    def of(cls, script: str) -> ScriptView:
        lines = script.splitlines()
        return cls(
            digest=script_digest(script),
            first_line=lines[0] if lines else "",
            size=len(script.encode()),
        )


class ScriptChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    which: str  # "prolog" or "epilog"
    action: ScriptAction
    index: int  # 1-based, as people count
    to: int | None = None  # MOVE: its new place
    before: tuple[ScriptView, ...]
    after: tuple[ScriptView, ...]
    content: str | None = None  # ADD, REPLACE: the new script whole

    @property
    def mask(self) -> str:
        return f"{SLURM}.{self.which}_bash_scripts"

    @property
    def words(self) -> str:
        if self.action == ScriptAction.REMOVE:
            return f"remove {self.which} {self.index} (sha256 {self.before[self.index - 1].digest})"
        if self.action in (ScriptAction.ADD, ScriptAction.REPLACE):
            new = self.after[self.index - 1]
            what = (
                f"add {self.which} at place {self.index}"
                if self.action == ScriptAction.ADD
                else f"replace {self.which} {self.index} (sha256 "
                f"{self.before[self.index - 1].digest})"
            )
            head = new.first_line[:60]
            return f"{what}: {new.size:,} bytes, sha256 {new.digest}, first line {head!r}"
        return f"move {self.which} {self.index} to place {self.to}"

    def rows(self) -> list[tuple[str, str, str]]:
        """(place, before, after) with each script named by its hash and first line."""
        count = max(len(self.before), len(self.after))

        def cell(views: tuple[ScriptView, ...], i: int) -> str:
            return f"{views[i].digest} {views[i].first_line[:40]}" if i < len(views) else "-"

        return [(str(i + 1), cell(self.before, i), cell(self.after, i)) for i in range(count)]


def scripts_of(cluster: Cluster, which: str) -> list[str]:
    slurm = cluster.slurm
    return list(
        (slurm.prolog_bash_scripts if which == "prolog" else slurm.epilog_bash_scripts) or []
    )


def _place(scripts: list[str], which: str, index: int, cid: str) -> None:
    if not scripts:
        raise ScriptError(f"{cid} has no {which} scripts")
    if not 1 <= index <= len(scripts):
        raise ScriptError(f"{cid} has {which} scripts 1 to {len(scripts)}, not {index}")


def _new_script(
    scripts: list[str], which: str, action: ScriptAction, index: int, content: str, cid: str
) -> ScriptChange:
    if not content.strip():
        raise ScriptError(f"the new {which} script is empty")
    if action == ScriptAction.ADD and not 1 <= index <= len(scripts) + 1:
        raise ScriptError(
            f"{cid} has {len(scripts)} {which} scripts; add at 1 to {len(scripts) + 1}"
        )
    if action == ScriptAction.REPLACE:
        _place(scripts, which, index, cid)
    digest = script_digest(content)
    same = [n for n, s in enumerate(scripts, 1) if script_digest(s) == digest]
    if same:
        raise ScriptError(f"{cid} already has this script as {which} {same[0]}")
    after = list(scripts)
    if action == ScriptAction.ADD:
        after.insert(index - 1, content)
    else:
        after[index - 1] = content
    return ScriptChange(
        which=which,
        action=action,
        index=index,
        before=tuple(ScriptView.of(s) for s in scripts),
        after=tuple(ScriptView.of(s) for s in after),
        content=content,
    )


def script_change(
    cluster: Cluster,
    which: str,
    action: ScriptAction,
    index: int,
    to: int | None = None,
    content: str | None = None,
) -> ScriptChange:
    scripts = scripts_of(cluster, which)
    cid = cluster.cluster_id
    if action in (ScriptAction.ADD, ScriptAction.REPLACE):
        return _new_script(scripts, which, action, index, content or "", cid)
    _place(scripts, which, index, cid)
    after = list(scripts)
    moved = after.pop(index - 1)
    if action == ScriptAction.MOVE:
        assert to is not None
        _place(scripts, which, to, cid)
        if to == index:
            raise ScriptError(f"{which} {index} is already in place {to}")
        after.insert(to - 1, moved)
    return ScriptChange(
        which=which,
        action=action,
        index=index,
        to=to,
        before=tuple(ScriptView.of(s) for s in scripts),
        after=tuple(ScriptView.of(s) for s in after),
    )


def apply_scripts(cluster: Cluster, change: ScriptChange) -> Cluster:
    """The cluster to PATCH: the scripts as read, in the planned order. The plan names each
    by its hash, so the whole list is rebuilt from the fresh read."""
    by_digest = {script_digest(s): s for s in scripts_of(cluster, change.which)}
    if change.content is not None:
        by_digest[script_digest(change.content)] = change.content
    ordered = [by_digest[v.digest] for v in change.after]
    changed, slurm = slurm_copy(cluster)
    setattr(slurm, f"{change.which}_bash_scripts", ordered)
    return changed


def scripts_applied(change: ScriptChange, cluster: Cluster) -> bool:
    now = tuple(script_digest(s) for s in scripts_of(cluster, change.which))
    return now == tuple(v.digest for v in change.after)


def script_reply(cluster: Cluster, which: str, index: int) -> Reply:
    """One script whole, for reading or copying (long ones span several blocks)."""
    scripts = scripts_of(cluster, which)
    try:
        _place(scripts, which, index, cluster.cluster_id)
    except ScriptError as error:
        return Reply(str(error)).add(Text(str(error)))
    script = scripts[index - 1]
    title = f"{cluster.cluster_id} {which} {index}"
    lines = script.splitlines() or ["(empty)"]
    return Reply(title).add(
        Heading(title),
        Table.of(("",), [(line,) for line in lines]),
        Note(
            f"{len(lines)} lines · {len(script.encode()):,} bytes · sha256 ",
            Code(script_digest(script)),
            f" · runs {'before' if which == 'prolog' else 'after'} every job, in list order",
        ),
    )
