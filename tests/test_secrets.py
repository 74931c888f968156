"""Settings given as Secret Manager references (sm://PROJECT/SECRET[#VERSION]): read at start
through the simulator's Secret Manager, end to end, and every unreadable one named with why."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sandbox.controlplane.secret_store import crc32c as simulator_crc32c
from bot.secrets import Reference, crc32c, payload_text, references_in
from tests.support.demo_stack import text_of
from tests.support.processes import Sandbox, replica, sandbox, wait_until


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with sandbox(tmp_path) as running:
        yield running


def test_the_reference_form_is_berglas_s() -> None:
    assert Reference.parse("sm://my-project/slack-bot-token") == Reference(
        "my-project", "slack-bot-token", "latest"
    )
    assert Reference.parse("sm://my-project/db_password#3").version == "3"
    assert Reference.parse("sm://123456789012/token").project == "123456789012"
    assert str(Reference.parse("sm://my-project/s")) == "sm://my-project/s#latest"
    for bad in ("sm://my-project", "sm://my-project/a/b", "sm://my-project/s#0", "sm://P/s"):
        with pytest.raises(ValueError, match="sm://PROJECT/SECRET"):
            Reference.parse(bad)


def test_only_values_that_are_references_are_read() -> None:
    environ = {"A": "sm://my-project/a", "B": "plain", "C": "sm://bad"}
    found, problems = references_in(environ, ["A", "B", "C", "D"])
    assert found == {"A": Reference("my-project", "a")}
    assert problems == [
        "C: sm://bad is not a Secret Manager reference of the form sm://PROJECT/SECRET or "
        "sm://PROJECT/SECRET#VERSION"
    ]


def test_both_checksums_agree_with_the_castagnoli_check_value() -> None:
    # the check value of CRC-32C over "123456789" (RFC 3720, B.4)
    assert crc32c(b"123456789") == simulator_crc32c(b"123456789") == 0xE3069283


def test_a_payload_is_checked_and_its_trailing_newline_dropped() -> None:
    reference = Reference("p-roject", "s")
    body = {"payload": {"data": "eG94Yi0xCg==", "dataCrc32c": str(crc32c(b"xoxb-1\n"))}}
    assert payload_text(200, body, reference) == "xoxb-1"
    body["payload"]["dataCrc32c"] = "1"
    with pytest.raises(Exception, match="checksum does not match"):
        payload_text(200, body, reference)


def check_config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", "check-config"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def secret(box: Sandbox, name: str, value: str | None = None, **change: object) -> None:
    body: dict[str, object] = {"project": "demo-project", "secret": name, **change}
    if value is not None:
        body["value"] = value
    box.simulator("secrets", body)


def test_serve_reads_its_slack_secrets_from_secret_manager(box: Sandbox, tmp_path: Path) -> None:
    config = box.config
    secret(box, "slack-bot-token", "an-old-token-in-version-1")
    secret(box, "slack-bot-token", config["bot_token"] + "\n")  # as `echo ... |` stores it
    secret(box, "slack-signing-secret", config["signing_secret"])
    bot = replica(
        tmp_path,
        box,
        "one",
        f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}",
        SLACK_BOT_TOKEN="sm://demo-project/slack-bot-token",
        SLACK_SIGNING_SECRET="sm://demo-project/slack-signing-secret#1",
        CLUSTERBOT_SECRET_MANAGER_URL=f"{box.url}/vertex",
    )
    shown = check_config(bot.env)
    assert shown.returncode == 0, shown.stderr
    assert "******** (from sm://demo-project/slack-bot-token#latest)" in shown.stdout
    assert config["bot_token"] not in shown.stdout + shown.stderr
    box.point_at(bot.events)
    try:
        bot.start()
        # the signing secret read from Secret Manager verifies Slack's request, and the token
        # read from it posts the answer
        assert box.command("alice", "/cluster list")["status"] == 200
        wait_until(
            lambda: any("train01" in text_of(m) for m in box.messages()), what="the list posted"
        )
    finally:
        bot.stop()
    accessed = [r["path"] for r in box.requests("GET") if r["path"].endswith(":access")]
    assert "/v1/projects/demo-project/secrets/slack-bot-token/versions/latest:access" in accessed
    assert "/v1/projects/demo-project/secrets/slack-signing-secret/versions/1:access" in accessed
    log = bot.log.read_text()
    assert config["bot_token"] not in log and config["signing_secret"] not in log


def test_check_config_names_each_reference_it_cannot_read_and_why(
    box: Sandbox, tmp_path: Path
) -> None:
    secret(box, "locked", "x", readable=False)
    secret(box, "retired", "x", disable=1)
    bot = replica(
        tmp_path,
        box,
        "one",
        "postgresql+asyncpg://clusterbot@/clusterbot?host=/cloudsql/p:r:i",
        SLACK_BOT_TOKEN="sm://demo-project/locked",
        SLACK_SIGNING_SECRET="sm://demo-project/missing",
        CLUSTERBOT_DATABASE_PASSWORD="sm://demo-project/retired#1",
        SLACK_APP_TOKEN="sm://Not_A_Project/x",
        CLUSTERBOT_SECRET_MANAGER_URL=f"{box.url}/vertex",
    )
    result = check_config(bot.env)
    assert result.returncode == 2
    problems = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 4, result.stderr
    text = "\n".join(problems)
    assert (
        "SLACK_BOT_TOKEN: cannot read sm://demo-project/locked#latest: Secret Manager answered "
        "403 PERMISSION_DENIED" in text
    )
    assert "roles/secretmanager.secretAccessor" in text
    assert "SLACK_SIGNING_SECRET: cannot read sm://demo-project/missing#latest: " in text
    assert "404 NOT_FOUND: Secret [projects/" in text and "gcloud secrets create missing" in text
    assert "CLUSTERBOT_DATABASE_PASSWORD: cannot read sm://demo-project/retired#1: " in text
    assert "is in DISABLED state" in text
    assert "SLACK_APP_TOKEN: sm://Not_A_Project/x is not a Secret Manager reference" in text
