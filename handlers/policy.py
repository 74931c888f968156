"""Who may do what: roles from people and groups of people, channels, approval rules.

Loaded from the TOML file named by ``CLUSTERBOT_POLICY_FILE``::

    default_role = "viewer"              # anyone not listed; "none" refuses them
    channels = ["C0MLINFRA"]             # where the bot answers; empty means everywhere
    [roles]
    admin = ["U0ADMIN"]
    approver = ["U0BOB", "S0PLATFORM"]   # a person's or a group's id, as the platform gives it
    operator = ["U0ALICE"]
    [approval]
    self_approval = false
    delete_approvers = ["admin", "approver"]
    expiry_minutes = 60
    [prices]
    "a3-highgpu-8g" = 80.0
    [idle]                               # see handlers/sweep/rules.py for every rule
    idle_after_minutes = 120
    cooldown_hours = 24
    often_days = 2
    auto_action = "off"                  # or "scale_to_zero" / "delete"
    grace_minutes = 240
    [pipelines]                          # the release hook's only callers
    "build@p.iam.gserviceaccount.com" = ["scale-to-zero"]
    "*@ci-p.iam.gserviceaccount.com" = { pre_approved = [], ask = ["delete"] }
    [schedules.offhours-eu]              # taken by the label clusterbot-schedule: offhours-eu
    off = "Mon-Fri 20:00"
    on = "Mon-Fri 08:00"
    tz = "Europe/Berlin"
    [health.channels]                    # a cluster's health alerts: the first pattern its id
    "train-*" = "C0GPUOPS"               # matches; the others go to the alert channel

The tables of the capabilities (``[idle]``, ``[pipelines]``, ``[schedules.NAME]``,
``[health]``) are declared by the capability that reads them, as a ``Section`` beside its
other declarations, and read with ``policy.section(SECTION)``: this module names none of
them. A table no capability declares is refused, as is one its capability cannot read.

Decisions are pure functions of (policy, who, what), so every rule is tested without Slack.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
)

T = TypeVar("T")
M = TypeVar("M")


class Role(IntEnum):
    NONE = 0
    VIEWER = 1
    OPERATOR = 2
    APPROVER = 3
    ADMIN = 4

    @property
    def label(self) -> str:
        return self.name.lower()


class Approval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    self_approval: bool = False
    delete_approvers: list[str] = Field(default_factory=lambda: ["approver", "admin"])
    expiry_minutes: float = Field(60.0, gt=0, le=7 * 24 * 60)

    @field_validator("delete_approvers")
    @classmethod
    def _roles(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in ("operator", "approver", "admin"):
                raise ValueError(f"{name!r} is not a role that may approve")
        return value


def first_match(table: Mapping[str, T], key: str, fold: Callable[[str], str] = str) -> T | None:
    """The entry of ``key`` itself, else of the first pattern with ``*`` it matches (both
    compared through ``fold``), else None."""
    if key in table:
        return table[key]
    for pattern, value in table.items():
        if "*" in pattern and fnmatch.fnmatchcase(fold(key), fold(pattern)):
            return value
    return None


@dataclass(frozen=True)
class Section(Generic[M]):
    """A capability's table in the policy file: its name, how it is read (a pydantic
    ``TypeAdapter``) and what it is when the file has none."""

    name: str
    adapter: TypeAdapter[M]
    default: Callable[[], M]

    def read(self, document: Any) -> M:
        return self.default() if document is None else self.adapter.validate_python(document)


class Policy(BaseModel):
    # the capabilities' tables are kept as written, and read by their sections
    model_config = ConfigDict(extra="allow")

    default_role: str = "viewer"
    channels: list[str] = Field(default_factory=list)
    roles: dict[str, list[str]] = Field(default_factory=dict)
    approval: Approval = Field(default_factory=Approval)
    prices: dict[str, float] = Field(default_factory=dict)
    _read: dict[str, Any] = PrivateAttr(default_factory=dict)

    def section(self, section: Section[M]) -> M:
        """The capability's table, read (and checked) once."""
        if section.name not in self._read:
            self._read[section.name] = section.read((self.model_extra or {}).get(section.name))
        read: M = self._read[section.name]
        return read

    def problems(self, sections: Iterable[Section[Any]]) -> list[str]:
        """Every problem of the capabilities' tables: one no capability declares, or one
        its capability cannot read; none when the policy is whole."""
        return section_problems(self.model_extra or {}, sections)

    @field_validator("roles")
    @classmethod
    def _known_roles(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for name in value:
            if name not in ("viewer", "operator", "approver", "admin"):
                raise ValueError(f"unknown role {name!r}: use viewer, operator, approver, admin")
        return value

    @field_validator("default_role")
    @classmethod
    def _default_role(cls, value: str) -> str:
        if value not in ("none", "viewer", "operator", "approver", "admin"):
            raise ValueError(f"unknown role {value!r}")
        return value

    def role_of(self, user_id: str, groups: frozenset[str] = frozenset()) -> Role:
        """The highest role granted to the user directly or through one of their groups."""
        best = Role[self.default_role.upper()]
        for name, members in self.roles.items():
            if user_id in members or groups & set(members):
                best = max(best, Role[name.upper()])
        return best

    def members(self) -> set[str]:
        """Everyone the roles name: people and groups alike (the platform tells them apart)."""
        return {m for members in self.roles.values() for m in members}

    def channel_allowed(self, channel_id: str) -> bool:
        return not self.channels or channel_id in self.channels


class PolicyError(Exception):
    pass


def _said(error: ValidationError, *within: str) -> list[str]:
    return [
        f"{'.'.join((*within, *(str(p) for p in e['loc'])))}: {e['msg']}" for e in error.errors()
    ]


def section_problems(document: Mapping[str, Any], sections: Iterable[Section[Any]]) -> list[str]:
    """Every problem of the tables beyond the core's in ``document``: a table no section is
    named after, or one its section cannot read."""
    named = {section.name: section for section in sections}
    problems = []
    for name, value in document.items():
        if name in Policy.model_fields:
            continue
        if name not in named:
            problems.append(f"{name}: not a table of the policy (misspelt?)")
            continue
        try:
            named[name].read(value)
        except ValidationError as error:
            problems += _said(error, name)
    return problems


def load_policy(path: Path | None, sections: Iterable[Section[Any]]) -> Policy:
    """The policy file read, every problem of it said at once; ``sections``: the tables the
    capabilities declare."""
    if path is None:
        return Policy()
    try:
        document: dict[str, Any] = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise PolicyError(f"cannot read policy file {path}: {error}") from error
    problems = section_problems(document, sections)
    policy = None
    try:
        policy = Policy.model_validate(document)
    except ValidationError as error:
        problems = _said(error) + problems
    if policy is None or problems:
        raise PolicyError(f"policy file {path} is invalid: {'; '.join(problems)}")
    return policy


def may_approve(policy: Policy, role: Role, *, destructive: bool = False) -> bool:
    """A destructive change (a delete) needs an admin or one of the delete approvers."""
    if destructive:
        return role == Role.ADMIN or role.label in policy.approval.delete_approvers
    return role >= Role.APPROVER


def approval_refusal(
    policy: Policy, approver: str, role: Role, requester: str, kind: str, *, destructive: bool
) -> str | None:
    """Why this person may not approve this request, or None when they may."""
    if not may_approve(policy, role, destructive=destructive):
        needed = " or ".join(policy.approval.delete_approvers) if destructive else "approver"
        return f"approving a {kind} needs the {needed} role; you are {role.label}"
    if approver == requester and not policy.approval.self_approval:
        return "you asked for this change, so someone else must approve it"
    return None
