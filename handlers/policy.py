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
    [idle]                               # see handlers/idle/rules.py for every rule
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

Decisions are pure functions of (policy, who, what), so every rule is tested without Slack.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Callable, Mapping
from enum import IntEnum
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from handlers.grammar import CommandError
from handlers.idle.rules import IdleRules
from handlers.schedules.times import Weekly, parse_weekly, parse_zone

T = TypeVar("T")

LABEL_VALUE = re.compile(r"^[a-z0-9_-]{1,63}$")  # a Google Cloud label's value


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


ReleaseAction = Literal["scale-to-zero", "delete"]  # what a pipeline's release may do


class PipelineCaller(BaseModel):
    """What one caller of the release hook may ask: ``pre_approved`` actions are taken when
    the queue drains, ``ask`` actions become an approval card."""

    model_config = ConfigDict(extra="forbid")

    pre_approved: list[ReleaseAction] = Field(default_factory=list)
    ask: list[ReleaseAction] = Field(default_factory=list)

    def may(self, action: str) -> bool:
        return action in self.pre_approved or action in self.ask


class ScheduleProfile(BaseModel):
    """An off-hours schedule a cluster takes by its label ``clusterbot-schedule: NAME``."""

    model_config = ConfigDict(extra="forbid")

    off: str  # "Mon-Fri 20:00", as /cluster schedule takes it
    on: str
    tz: str = "UTC"

    @model_validator(mode="after")
    def _readable(self) -> ScheduleProfile:
        try:
            self.times()
        except CommandError as error:
            raise ValueError(error.reason) from None
        return self

    def times(self) -> tuple[Weekly, Weekly, str]:
        off = parse_weekly(self.off.split(), "schedule")
        on = parse_weekly(self.on.split(), "schedule")
        if off == on:
            raise CommandError("off and on are the same time", "schedule")
        return off, on, parse_zone(self.tz, "schedule")


def first_match(table: Mapping[str, T], key: str, fold: Callable[[str], str] = str) -> T | None:
    """The entry of ``key`` itself, else of the first pattern with ``*`` it matches (both
    compared through ``fold``), else None."""
    if key in table:
        return table[key]
    for pattern, value in table.items():
        if "*" in pattern and fnmatch.fnmatchcase(fold(key), fold(pattern)):
            return value
    return None


class HealthPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # a cluster id, or a pattern with ``*``, -> the channel its health alerts go to
    channels: dict[str, str] = Field(default_factory=dict)

    def channel_for(self, cluster_id: str) -> str | None:
        """The channel the policy names for the cluster's health alerts, or None."""
        return first_match(self.channels, cluster_id)


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default_role: str = "viewer"
    channels: list[str] = Field(default_factory=list)
    roles: dict[str, list[str]] = Field(default_factory=dict)
    approval: Approval = Field(default_factory=Approval)
    prices: dict[str, float] = Field(default_factory=dict)
    idle: IdleRules = Field(default_factory=IdleRules)
    # The only callers of the release hook: a Google identity (a service account's email),
    # or a pattern with ``*`` such as ``*@ci.iam.gserviceaccount.com`` -> the actions it may
    # take without an approver (a list), or ``{pre_approved = [...], ask = [...]}``.
    pipelines: dict[str, PipelineCaller] = Field(default_factory=dict)
    # Off-hours schedules by cluster label, in the spirit of Cloud Custodian's offhours tag:
    # a cluster labelled ``clusterbot-schedule: NAME`` is offered the schedule NAME on a card.
    schedules: dict[str, ScheduleProfile] = Field(default_factory=dict)
    health: HealthPolicy = Field(default_factory=HealthPolicy)

    @field_validator("schedules")
    @classmethod
    def _label_values(cls, value: dict[str, ScheduleProfile]) -> dict[str, ScheduleProfile]:
        for name in value:
            if not LABEL_VALUE.match(name):
                raise ValueError(
                    f"schedule {name!r} cannot be a label's value: use up to 63 lowercase "
                    "letters, digits, - and _"
                )
        return value

    @field_validator("roles")
    @classmethod
    def _known_roles(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for name in value:
            if name not in ("viewer", "operator", "approver", "admin"):
                raise ValueError(f"unknown role {name!r}: use viewer, operator, approver, admin")
        return value

    @field_validator("pipelines", mode="before")
    @classmethod
    def _callers(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: {"pre_approved": v} if isinstance(v, list) else v for k, v in value.items()}

    def pipeline(self, email: str) -> PipelineCaller | None:
        """The caller's entry: its own, else the first pattern it matches (an email in any
        case); None: not a caller."""
        return first_match(self.pipelines, email, fold=str.lower)

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


def load_policy(path: Path | None) -> Policy:
    if path is None:
        return Policy()
    try:
        document: dict[str, Any] = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise PolicyError(f"cannot read policy file {path}: {error}") from error
    try:
        return Policy.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
        )
        raise PolicyError(f"policy file {path} is invalid: {problems}") from error


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
