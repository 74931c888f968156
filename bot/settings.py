"""clusterbot's configuration: one pydantic-settings model, read from the environment.

Built in ``main()``, never at import. ``load_settings`` reports every problem at once, each
with a hint of how to fix it; secrets are ``SecretStr`` and are redacted when printed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlparse, urlsplit, urlunsplit

from pydantic import (
    AliasChoices,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.jobs import digest_trigger
from bot.secrets import (
    SECRET_MANAGER_URL,
    Reference,
    is_reference,
    read_references,
    references_in,
)
from handlers.domain.names import Target

Mode = Literal["serve", "demo", "simulator", "sweep", "migrate"]
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def state_dir() -> Path:
    """Where clusterbot keeps its state when nothing else is configured: the XDG state
    directory (``$XDG_STATE_HOME/clusterbot``, else ``~/.local/state/clusterbot``), never the
    working directory, so `serve` and a cron `sweep --once` share one database."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "clusterbot"


def default_database_url() -> str:
    return f"sqlite+aiosqlite:///{state_dir() / 'clusterbot.db'}"


HINTS = {
    "slack_bot_token": "the Bot User OAuth Token (xoxb-...) from your Slack app's "
    "OAuth & Permissions page",
    "slack_signing_secret": "the Signing Secret from your Slack app's Basic Information page",
    "slack_app_token": "an app-level token (xapp-...) with connections:write, from Basic "
    "Information > App-Level Tokens; set it only for Socket Mode",
    "targets": "a comma list of project/region, e.g. "
    "my-project/us-central1,my-project/europe-west4",
    "database_url": "sqlite+aiosqlite:///path/to/clusterbot.db or "
    "postgresql+asyncpg://user@host:5432/db with the password in "
    "CLUSTERBOT_DATABASE_PASSWORD",
    "log_level": "one of DEBUG, INFO, WARNING, ERROR",
}


def env_name(field: str) -> str:
    """The environment variable that sets a settings field."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"CLUSTERBOT_{field.upper()}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CLUSTERBOT_", extra="ignore", validate_default=True, validate_by_name=True
    )

    slack_bot_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_BOT_TOKEN")
    )
    slack_signing_secret: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_SIGNING_SECRET")
    )
    slack_app_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_APP_TOKEN")
    )
    port: int = Field(8080, ge=1, le=65535, validation_alias=AliasChoices("PORT"))
    host: str = "0.0.0.0"  # every interface, for containers; the demo binds 127.0.0.1
    google_application_credentials: Path | None = Field(
        None, validation_alias=AliasChoices("GOOGLE_APPLICATION_CREDENTIALS")
    )
    targets: Annotated[list[Target], NoDecode] = Field(default_factory=list)
    database_url: str = Field(default_factory=default_database_url)
    database_password: SecretStr | None = None  # joined to database_url's user in memory
    # a local SQLite file on App Engine flexible or Cloud Run: refused unless this is true
    allow_ephemeral_sqlite: bool = False
    secret_manager_url: str = SECRET_MANAGER_URL
    vertex_api_url: str | None = None
    # Cloud Monitoring, for GPU nodes' utilisation (the simulator serves the same v3 paths)
    monitoring_api_url: str = "https://monitoring.googleapis.com/"
    vertex_static_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    # the chat platform the bot serves (bot/platform.py's PLATFORMS): Slack is the one shipped
    chat_platform: Literal["slack"] = "slack"
    policy_file: Path | None = None
    alert_channel: str | None = None
    # unset: each cluster's data parser is found (newest first) and kept in the database
    slurm_api_version: str | None = Field(None, pattern=r"^v0\.0\.\d+$")
    # Control-plane calls in flight at once, not a minute's (a quota passed answers 429 with
    # Retry-After, which the client honours). 32: a sweep of 1,000 clusters (two Slurm queries
    # each at ~50 ms) takes about 3 s of latency, a list page per target goes out together
    # for up to 32 targets, far from a connection pool's limits (aiohttp's default is 100).
    vertex_concurrency: int = Field(32, ge=1, le=256)
    # Changes a minute per project and region sent by crowds (a fleet's night), each waiting
    # its slot: Vertex AI's quotas page gives 60 "job or long-running operation submission
    # requests" a minute per region, and a change submits one.
    vertex_writes_per_minute: int = Field(60, ge=1, le=100_000)
    vertex_retry_deadline: float = Field(120.0, gt=0, le=3600)
    # seconds one control-plane call may take (the server is told a little less:
    # X-Server-Timeout); with the retry deadline, how long a change may still be applied
    vertex_request_timeout: float = Field(30.0, ge=6, le=300)
    # seconds one Slack Web API call may take: how long a post may still arrive once sent
    slack_timeout: float = Field(30.0, ge=1, le=300)
    sweep_interval: float = Field(900.0, gt=0, le=86_400)
    # scheduled sweeps ("Sweep now" too), and cost reports, in child processes: no ack waits
    sweep_process: bool = True
    report_process: bool = True
    drain_seconds: float = Field(20.0, ge=0, le=600)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    replica_id: str | None = None  # default host:port; stable across restarts of one replica
    # the pipeline hook's callers' Google-signed OIDC ID token audience; unset, it answers 404
    oidc_audience: str | None = None
    oidc_certs_url: str = "https://www.googleapis.com/oauth2/v1/certs"
    release_check_seconds: float = Field(30.0, gt=0, le=3600)  # between looks at the queue
    schedule_check_seconds: float = Field(30.0, gt=0, le=600)  # between looks at schedules
    release_grace_seconds: float = Field(60.0, ge=0, le=3600)  # empty this long, then act
    # the weekly cost digest in the alert channel: a crontab line (minute hour day month
    # weekday) in digest_timezone; "off" posts none
    digest_cron: str = "0 9 * * mon"
    digest_timezone: str = "UTC"
    debug_crash_at: str | None = None  # testing only: exit at this named step of a change
    # testing only: at this named step, write the step's name into ``debug_pause_file`` and
    # wait until that file is gone (a test does something to the world meanwhile)
    debug_pause_at: str | None = None
    debug_pause_file: str | None = None

    @field_validator("targets", mode="before")
    @classmethod
    def _split_targets(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [Target.parse(part) for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _digest_when(self) -> Settings:
        if self.digest_cron.strip().lower() != "off":
            digest_trigger(self.digest_cron, self.digest_timezone)  # a ValueError says why
        return self

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("slack_bot_token")
    @classmethod
    def _bot_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith("xoxb-"):
            raise ValueError("must start with xoxb-")
        return value

    @field_validator("slack_app_token")
    @classmethod
    def _app_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith("xapp-"):
            raise ValueError("must start with xapp-")
        return value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("must use sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value

    @model_validator(mode="after")
    def _join_password(self) -> Settings:
        """The password kept apart (often a Secret Manager reference) joined to the URL's
        user, in memory only; the URL is otherwise kept as written."""
        if self.database_password is None:
            return self
        parts = urlsplit(self.database_url)
        if not parts.scheme.startswith("postgresql"):
            raise ValueError("CLUSTERBOT_DATABASE_PASSWORD applies to PostgreSQL only")
        user, at, host = parts.netloc.rpartition("@")
        if not at or not user:
            raise ValueError("CLUSTERBOT_DATABASE_URL names no user for the password")
        if ":" in user:
            raise ValueError(
                "CLUSTERBOT_DATABASE_URL has a password and CLUSTERBOT_DATABASE_PASSWORD is set: "
                "give it once, in CLUSTERBOT_DATABASE_PASSWORD"
            )
        password = quote(self.database_password.get_secret_value(), safe="")
        self.database_url = urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))
        return self

    @field_validator("vertex_api_url", "slack_api_url", "secret_manager_url", "monitoring_api_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and (
            urlparse(value).scheme not in ("http", "https") or not urlparse(value).netloc
        ):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("policy_file", "google_application_credentials")
    @classmethod
    def _existing_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no file at {value}")
        return value

    _references: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None

    def secret_values(self) -> list[str]:
        """Values no log line may contain: the secrets (read from Secret Manager or not), and
        the database password."""
        secrets = [getattr(self, f) for f in type(self).model_fields]
        values = [s.get_secret_value() for s in secrets if isinstance(s, SecretStr)]
        password = urlparse(self.database_url).password
        return [v for v in [*values, password or ""] if v]

    def redacted(self) -> dict[str, str]:
        """Every setting by its environment name, secrets shown as set or unset only."""
        out: dict[str, str] = {}
        for field in type(self).model_fields:
            value = getattr(self, field)
            if isinstance(value, SecretStr):
                shown = "********"
                if field in self._references:
                    shown += f" (from {self._references[field]})"
            elif value is None:
                shown = "(unset)"
            elif field == "targets":
                shown = ",".join(str(t) for t in value) or "(none)"
            elif field == "database_url":
                shown = _redact_url(str(value))
                if field in self._references:
                    shown = f"******** (from {self._references[field]})"
            else:
                shown = str(value)
            out[env_name(field)] = shown
        return out


def _redact_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.password:
        return url.replace(f":{parsed.password}@", ":********@", 1)
    return url


class ConfigError(Exception):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def _field_problems(error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else ""
        name = env_name(field) if field in Settings.model_fields else field
        message = str(item["msg"]).removeprefix("Value error, ")
        hint = HINTS.get(field)
        said = f"{name}: {message}" if name else message
        problems.append(said + (f" (expected {hint})" if hint else ""))
    return problems


def _requirement_problems(present: Mapping[str, bool], mode: Mode) -> list[str]:
    """What ``mode`` needs set, from which settings are present (valid or not)."""
    if mode == "sweep":
        return [
            f"{env_name('targets')} is required (expected {HINTS['targets']})"
            for _ in [0]
            if not present["targets"]
        ]
    if mode != "serve":
        return []
    needed = ["slack_bot_token", "targets"]
    if not present["slack_app_token"]:
        needed.append("slack_signing_secret")  # HTTP mode verifies every request with it
    return [
        f"{env_name(field)} is required (expected {HINTS[field]})"
        for field in needed
        if not present[field]
    ]


# Where the instance's disk goes with the instance, by the variables each platform sets:
# App Engine flexible, https://cloud.google.com/appengine/docs/flexible/python/runtime
# ("Environment variables": GAE_INSTANCE, GAE_SERVICE, ...); Cloud Run,
# https://cloud.google.com/run/docs/container-contract#env-vars (K_SERVICE, K_REVISION for a
# service, CLOUD_RUN_JOB for a job).
EPHEMERAL_PLATFORMS = (
    ("App Engine flexible", ("GAE_INSTANCE", "GAE_SERVICE")),
    ("Cloud Run", ("K_SERVICE", "K_REVISION")),
    ("Cloud Run", ("CLOUD_RUN_JOB",)),
)


def ephemeral_platform(environ: Mapping[str, str]) -> str | None:
    """The platform this runs on whose instances keep no disk, if any."""
    for platform, names in EPHEMERAL_PLATFORMS:
        if all(environ.get(name) for name in names):
            return platform
    return None


def storage_problems(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    """A SQLite file where the disk is lost with the instance, unless the operator accepts it."""
    platform = ephemeral_platform(environ)
    if platform is None or settings.allow_ephemeral_sqlite:
        return []
    if not settings.database_url.startswith("sqlite"):
        return []
    return [
        f"{env_name('database_url')}: a SQLite file on {platform} is lost with the instance "
        "(pending requests, the audit log and the specs kept for Restore); set it to "
        "PostgreSQL (docs/DEPLOY.md), or set CLUSTERBOT_ALLOW_EPHEMERAL_SQLITE=true to accept "
        "that loss"
    ]


# Read to read the references, so never references themselves.
NEVER_REFERENCES = ("CLUSTERBOT_VERTEX_STATIC_TOKEN", "CLUSTERBOT_SECRET_MANAGER_URL")


def reference_names() -> dict[str, str]:
    """Each setting that may be a Secret Manager reference: environment name -> field."""
    names = {env_name(field): field for field in Settings.model_fields}
    return {name: field for name, field in names.items() if name not in NEVER_REFERENCES}


def _read_references(references: dict[str, Reference]) -> tuple[dict[str, str], list[str]]:
    import asyncio

    from bot.vertex.auth import token_source

    tokens = token_source(os.environ.get("CLUSTERBOT_VERTEX_STATIC_TOKEN", "").strip() or None)
    url = os.environ.get("CLUSTERBOT_SECRET_MANAGER_URL", "").strip() or SECRET_MANAGER_URL
    return asyncio.run(read_references(references, url=url, tokens=tokens))


def load_settings(mode: Mode = "serve") -> Settings:
    """Build settings from the environment, Secret Manager references read; raise
    ``ConfigError`` listing every problem."""
    names = reference_names()
    references, problems = references_in(os.environ, names)
    values: dict[str, str] = {}
    if references:
        values, unread = _read_references(references)
        problems += unread
    # a reference not read (or malformed) is reported as such, not validated as a value
    unresolved = {n for n in names if is_reference(os.environ.get(n)) and n not in values}
    overrides: dict[str, Any] = {names[name]: value for name, value in values.items()}
    try:
        settings: Settings | None = Settings(**overrides)
    except ValidationError as error:
        settings = None
        problems += [p for p in _field_problems(error) if p.split(":", 1)[0] not in unresolved]
    if settings is not None:
        settings._references = {names[n]: str(r) for n, r in references.items()}
    fields = ("slack_bot_token", "slack_signing_secret", "slack_app_token", "targets")
    if settings is not None:
        present = {f: bool(getattr(settings, f)) for f in fields}
    else:
        present = {f: bool(os.environ.get(env_name(f), "").strip()) for f in fields}
    problems += _requirement_problems(present, mode)
    if settings is not None and mode in ("serve", "sweep"):
        problems += storage_problems(settings, os.environ)
    if problems or settings is None:
        raise ConfigError(problems)
    return settings


def say_invalid(command: str, problems: Sequence[str], *, lead: str = "") -> None:
    """Every problem on stderr, under one line that counts them."""
    count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
    print(f"{lead}clusterbot {command}: configuration is invalid ({count}):", file=sys.stderr)
    for problem in problems:
        print(f"  - {problem}", file=sys.stderr)
