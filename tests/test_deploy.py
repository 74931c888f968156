"""The deployment files agree with the code: what they run, check and configure exists.

No container engine runs here, so the image is not built; what can be checked is: the
Dockerfile's instructions, its health check run for real against a live service, app.yaml's
probes and variables, the Slack manifests against the listeners and routes, and the README's
configuration table against the settings model.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import build_parser
from bot.manifest import usage_hint
from bot.sandbox.slack.workspace import INSTALLED_SCOPES
from bot.settings import Settings, env_name
from bot.slack.listeners import COMMAND
from handlers.actions import ActionId
from handlers.capabilities import REGISTRY
from tests.support.demo_stack import Stack, demo_stack

ROOT = Path(__file__).resolve().parent.parent


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    joined: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in joined]


DOCKERFILE = instructions(ROOT / "Dockerfile")


def final_stage() -> list[tuple[str, str]]:
    starts = [i for i, (op, _) in enumerate(DOCKERFILE) if op == "FROM"]
    return DOCKERFILE[starts[-1] :]


def test_dockerfile_is_multi_stage_slim_and_non_root() -> None:
    bases = [args for op, args in DOCKERFILE if op == "FROM"]
    assert len(bases) >= 2
    assert all(b.startswith("python:3.11-slim") for b in bases)
    users = [args for op, args in final_stage() if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    installs = " ".join(args for op, args in final_stage() if op == "RUN")
    assert "[dev]" not in installs and "pytest" not in installs  # runtime dependencies only


def test_dockerfile_runs_clusterbot_serve_on_port() -> None:
    entry = json.loads(next(args for op, args in final_stage() if op == "ENTRYPOINT"))
    command = json.loads(next(args for op, args in final_stage() if op == "CMD"))
    assert entry == ["clusterbot"] and command == ["serve"]
    scripts = (ROOT / "pyproject.toml").read_text()
    assert 'clusterbot = "bot.cli:main"' in scripts
    subcommands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert "serve" in subcommands
    env = " ".join(args for op, args in final_stage() if op == "ENV")
    assert "PORT=8080" in env
    assert env_name("port") == "PORT"
    assert ("STOPSIGNAL", "SIGTERM") in final_stage()


def test_dockerfile_copies_only_what_exists() -> None:
    for op, args in DOCKERFILE:
        if op != "COPY" or "--from" in args:
            continue
        *sources, _destination = [a for a in shlex.split(args) if not a.startswith("--")]
        for source in sources:
            assert (ROOT / source).exists(), source
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "tests" in ignored and ".venv" in ignored


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as stack:
        yield stack


async def test_dockerfile_healthcheck_command_works(live: Stack) -> None:
    healthcheck = next(args for op, args in final_stage() if op == "HEALTHCHECK")
    command = json.loads(healthcheck[healthcheck.index("CMD") + 3 :].strip())
    assert command[0] == "python" and "/healthz" in command[-1]
    port = live.url.rsplit(":", 1)[1]
    import asyncio

    process = await asyncio.create_subprocess_exec(
        sys.executable, *command[1:], env={**os.environ, "PORT": port}
    )
    assert await asyncio.wait_for(process.wait(), 30) == 0
    process = await asyncio.create_subprocess_exec(
        sys.executable, *command[1:], env={**os.environ, "PORT": "1"}, stderr=subprocess.DEVNULL
    )
    assert await asyncio.wait_for(process.wait(), 30) != 0  # and it fails when nothing answers


APP_YAML: dict[str, Any] = yaml.safe_load((ROOT / "app.yaml").read_text())


async def test_app_yaml_probes_the_service_routes(live: Stack) -> None:
    assert APP_YAML["runtime"] == "custom" and APP_YAML["env"] == "flex"
    scaling = APP_YAML.get("manual_scaling", {}).get("instances") or APP_YAML.get(
        "automatic_scaling", {}
    ).get("min_num_instances", 0)
    assert scaling >= 1  # the scheduler and the tracker must keep running
    for probe, route in (("liveness_check", "/healthz"), ("readiness_check", "/readyz")):
        assert APP_YAML[probe]["path"] == route
        async with live.session.get(live.url + route) as reply:
            assert reply.status == 200, route


def test_app_yaml_sets_only_real_settings_and_no_secrets() -> None:
    known = {env_name(field) for field in Settings.model_fields}
    variables = APP_YAML["env_variables"]
    assert set(variables) <= known
    # references to Secret Manager, filled in by deploy.sh and read by the service at start
    assert variables["SLACK_BOT_TOKEN"] == "${BOT_TOKEN_REF}"
    assert variables["SLACK_SIGNING_SECRET"] == "${SIGNING_SECRET_REF}"
    assert variables["CLUSTERBOT_DATABASE_PASSWORD"] == "${DATABASE_PASSWORD_REF}"
    assert APP_YAML["beta_settings"] == {"cloud_sql_instances": "${CLOUD_SQL_INSTANCE}"}
    text = (ROOT / "app.yaml").read_text()
    assert not re.search(r"xox[bap]-[0-9A-Za-z]", text)
    script = ROOT / "docs/deploy/appengine/deploy.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    assert "gcloud secrets versions access" not in script.read_text()  # no value passes through


@pytest.mark.parametrize("name", ["manifest.yaml", "manifest-socket-mode.yaml"])
def test_manifest_matches_what_the_code_registers(name: str) -> None:
    manifest = yaml.safe_load((ROOT / "docs/deploy/slack" / name).read_text())
    [command] = manifest["features"]["slash_commands"]
    assert command["command"] == COMMAND
    assert command["usage_hint"] == usage_hint()  # made from the registry: make manifests
    hint_words = set(re.findall(r"[a-z]+", command["usage_hint"]))
    assert set(REGISTRY.by_name) <= hint_words
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == {
        "commands",
        "chat:write",
        "files:read",
        "files:write",
        "channels:history",  # a post cut off by a crash is looked for before posting again
        "groups:history",
    }
    # the stand-in's bot token has exactly these, and refuses a method needing another
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == INSTALLED_SCOPES
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    assert manifest["settings"]["event_subscriptions"]["bot_events"] == ["app_home_opened"]
    settings = manifest["settings"]
    assert settings["interactivity"]["is_enabled"] is True  # approval and alert buttons
    if name == "manifest.yaml":
        assert settings["socket_mode_enabled"] is False
        assert command["url"].endswith("/slack/events")
        assert settings["interactivity"]["request_url"].endswith("/slack/events")
    else:
        assert settings["socket_mode_enabled"] is True
        assert "url" not in command


def test_code_calls_only_methods_the_scopes_allow() -> None:
    """Every Web API method the bot calls is covered by chat:write and commands, except
    usergroups.users.list, which is used only when the policy names user groups; the views
    methods need no scope (https://docs.slack.dev/reference/methods/views.open)."""
    source = "\n".join(p.read_text() for p in (ROOT / "bot" / "slack").glob("*.py"))
    methods = set(re.findall(r"client\.([a-z]+_[a-zA-Z_0-9]+)\(", source))
    assert methods == {
        "chat_postMessage",
        "chat_update",
        "chat_postEphemeral",
        "usergroups_users_list",
        "views_open",
        "views_update",
        "views_publish",
        "files_upload_v2",  # files:write: the audit log as a CSV file
        "conversations_history",  # channels:history, groups:history: a post's look after a crash
        "conversations_replies",
    }
    assert {str(a) for a in ActionId} >= {
        "idle_scale_to_zero",
        "idle_delete",
        "idle_snooze",
        "idle_keep",
    }


def test_the_configuration_table_matches_the_settings_model() -> None:
    guide = (ROOT / "docs" / "OPERATING.md").read_text()
    table = guide.split("\n## Configuration", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", table, flags=re.MULTILINE))
    settings = {env_name(field) for field in Settings.model_fields}
    assert documented == settings, documented ^ settings


def test_make_demo_takes_a_port() -> None:
    dry = subprocess.run(
        ["make", "-n", "demo", "PORT=9123"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert dry.returncode == 0, dry.stderr
    assert ".venv/bin/clusterbot demo --port 9123" in dry.stdout
