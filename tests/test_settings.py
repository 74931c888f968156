"""Settings from the environment and `clusterbot check-config`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.cli import main
from bot.settings import ConfigError, load_settings
from handlers.domain.names import Target
from tests.conftest import Simulator

ALL_VARS = [
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "PORT",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GAE_INSTANCE",
    "GAE_SERVICE",
    "K_SERVICE",
    "K_REVISION",
    "CLOUD_RUN_JOB",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for name in list(os.environ):
        if name in ALL_VARS or name.startswith("CLUSTERBOT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def valid(monkeypatch: pytest.MonkeyPatch, simulator: Simulator | None = None) -> None:
    """A whole configuration; with ``simulator``, its targets are listed there."""
    if simulator is not None:
        monkeypatch.setenv("CLUSTERBOT_VERTEX_API_URL", simulator.url)
    monkeypatch.setenv("CLUSTERBOT_VERTEX_STATIC_TOKEN", "static-token-value")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1234-secretbot")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "signing-secret-value")
    monkeypatch.setenv("CLUSTERBOT_TARGETS", "demo-project/us-central1, other-proj/europe-west4")
    monkeypatch.setenv(
        "CLUSTERBOT_DATABASE_URL", "postgresql+asyncpg://bot:dbpassword@db.internal:5432/bot"
    )


def test_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    valid(monkeypatch)
    monkeypatch.setenv("PORT", "9090")
    settings = load_settings("serve")
    assert settings.targets == [
        Target("demo-project", "us-central1"),
        Target("other-proj", "europe-west4"),
    ]
    assert settings.port == 9090
    assert not settings.socket_mode
    assert settings.slack_api_url == "https://slack.com/api/"
    assert settings.vertex_api_url is None


def test_defaults_need_nothing_for_the_demo() -> None:
    settings = load_settings("demo")
    assert settings.database_url.startswith("sqlite+aiosqlite:///")
    assert settings.port == 8080


def test_every_problem_is_reported_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxp-user-token")
    monkeypatch.setenv("CLUSTERBOT_TARGETS", "just-a-project")
    monkeypatch.setenv("CLUSTERBOT_DATABASE_URL", "mysql://x")
    monkeypatch.setenv("PORT", "70000")
    with pytest.raises(ConfigError) as caught:
        load_settings("serve")
    text = "\n".join(caught.value.problems)
    assert "SLACK_BOT_TOKEN: must start with xoxb-" in text
    assert "CLUSTERBOT_TARGETS" in text and "project/region" in text
    assert "CLUSTERBOT_DATABASE_URL" in text
    assert "PORT" in text
    assert "SLACK_SIGNING_SECRET is required" in text
    assert len(caught.value.problems) == 5


def test_socket_mode_needs_no_signing_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    monkeypatch.setenv("CLUSTERBOT_TARGETS", "demo-project/us-central1")
    assert load_settings("serve").socket_mode


def test_missing_policy_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    valid(monkeypatch)
    monkeypatch.setenv("CLUSTERBOT_POLICY_FILE", str(tmp_path / "absent.toml"))
    with pytest.raises(ConfigError, match="no file at"):
        load_settings("serve")


async def check_config() -> int:
    """`clusterbot check-config` in a thread of its own (it runs its own event loop), while
    the simulator answers on this one."""
    return int(await asyncio.to_thread(main, ["check-config"]))


async def test_check_config_redacts_secrets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], simulator: Simulator
) -> None:
    valid(monkeypatch, simulator)
    assert await check_config() == 0
    out = capsys.readouterr().out
    assert "secretbot" not in out and "signing-secret-value" not in out
    assert "dbpassword" not in out and "static-token-value" not in out
    assert "SLACK_BOT_TOKEN" in out and "********" in out
    assert "demo-project/us-central1,other-proj/europe-west4" in out
    assert "configuration is valid: HTTP mode on port 8080, 2 target(s), each listed" in out


async def test_check_config_lists_each_target(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], simulator: Simulator
) -> None:
    """A missing grant on one project shows in check-config, not first at a sweep."""
    valid(monkeypatch, simulator)
    denied = "Permission 'aiplatform.modelDevelopmentClusters.list' denied on resource"
    await simulator.fault(method="GET", path="other-proj", status=403, message=denied)
    assert await check_config() == 2
    err = capsys.readouterr().err
    assert "configuration is invalid (1 problem)" in err
    assert "CLUSTERBOT_TARGETS: cannot list other-proj/europe-west4: " in err and denied in err


def test_check_config_exits_2_listing_problems(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLACK_APP_TOKEN", "xoxb-wrong-kind")
    assert main(["check-config"]) == 2
    err = capsys.readouterr().err
    assert "configuration is invalid (3 problems)" in err
    assert "SLACK_APP_TOKEN: must start with xapp-" in err
    assert "SLACK_BOT_TOKEN is required" in err
    assert "CLUSTERBOT_TARGETS is required" in err
    assert "xoxb-wrong-kind" not in err


async def test_check_config_reads_the_policy_file(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    simulator: Simulator,
) -> None:
    valid(monkeypatch, simulator)
    policy = tmp_path / "policy.toml"
    policy.write_text('[roles]\nsuperuser = ["U1"]\n')
    monkeypatch.setenv("CLUSTERBOT_POLICY_FILE", str(policy))
    assert await check_config() == 2
    err = capsys.readouterr().err
    assert "unknown role 'superuser'" in err
    # every problem at once: the core's and each capability's table, a misspelt one too
    policy.write_text(
        '[roles]\nsuperuser = ["U1"]\n[idel]\nidle_after_minutes = 5\n'
        "[idle]\nidle_after_minutes = -1\n"
        '[schedules.Nights]\noff = "19:00"\non = "07:00"\n'
        '[pipelines]\n"ci@p.iam.gserviceaccount.com" = ["reboot"]\n'
    )
    assert await check_config() == 2
    err = capsys.readouterr().err
    assert "unknown role 'superuser'" in err
    assert "idel: not a table of the policy (misspelt?)" in err
    assert "idle.idle_after_minutes: Input should be greater than 0" in err
    assert "schedule 'Nights' cannot be a label's value" in err
    assert "pipelines.ci@p.iam.gserviceaccount.com.pre_approved.0" in err
    policy.write_text(
        '[roles]\napprover = ["U1"]\n[approval]\nexpiry_minutes = 30\n'
        '[idle]\nidle_after_minutes = 30\n[health.channels]\n"train-*" = "C0GPUOPS"\n'
    )
    assert await check_config() == 0


PLATFORMS = {
    "App Engine flexible": {"GAE_INSTANCE": "aef-clusterbot-1-abcd", "GAE_SERVICE": "clusterbot"},
    "Cloud Run": {"K_SERVICE": "clusterbot", "K_REVISION": "clusterbot-00001-abc"},
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_serve_refuses_a_sqlite_file_where_the_disk_goes_with_the_instance(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], platform: str
) -> None:
    valid(monkeypatch)
    monkeypatch.delenv("CLUSTERBOT_DATABASE_URL")  # the default: a SQLite file
    for name, value in PLATFORMS[platform].items():
        monkeypatch.setenv(name, value)
    assert main(["serve"]) == 2
    assert capsys.readouterr().err.splitlines() == [  # one line: one entry in the platform's log
        f"clusterbot serve: cannot start: CLUSTERBOT_DATABASE_URL: a SQLite file on {platform} "
        "is lost with the instance "
        "(pending requests, the audit log and the specs kept for Restore); set it to "
        "PostgreSQL (docs/DEPLOY.md), or set CLUSTERBOT_ALLOW_EPHEMERAL_SQLITE=true to accept "
        "that loss"
    ]
    assert load_settings("demo").database_url.startswith("sqlite")  # the demo is local
    monkeypatch.setenv("CLUSTERBOT_ALLOW_EPHEMERAL_SQLITE", "true")
    assert load_settings("serve").database_url.startswith("sqlite")
    monkeypatch.delenv("CLUSTERBOT_ALLOW_EPHEMERAL_SQLITE")
    monkeypatch.setenv("CLUSTERBOT_DATABASE_URL", "postgresql+asyncpg://bot@db:5432/bot")
    assert load_settings("serve").database_url.startswith("postgresql")


def test_a_sqlite_file_is_fine_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    valid(monkeypatch)
    monkeypatch.delenv("CLUSTERBOT_DATABASE_URL")
    monkeypatch.setenv("GAE_SERVICE", "clusterbot")  # one variable alone is not App Engine
    assert load_settings("serve").database_url.startswith("sqlite")


async def test_the_database_password_is_kept_apart_from_its_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], simulator: Simulator
) -> None:
    valid(monkeypatch, simulator)
    socket = "postgresql+asyncpg://clusterbot@/clusterbot?host=/cloudsql/my-project:us-central1:db"
    monkeypatch.setenv("CLUSTERBOT_DATABASE_URL", socket)
    monkeypatch.setenv("CLUSTERBOT_DATABASE_PASSWORD", "p@ss:w/rd")
    settings = load_settings("serve")
    from sqlalchemy.engine import make_url

    joined = make_url(settings.database_url)
    assert joined.password == "p@ss:w/rd"
    assert joined.render_as_string() == make_url(socket).set(password="x").render_as_string()
    assert "p@ss:w/rd" in settings.secret_values() and "p%40ss%3Aw%2Frd" in settings.secret_values()
    assert await check_config() == 0
    out = capsys.readouterr().out
    assert "p%40ss" not in out and "p@ss" not in out
    monkeypatch.setenv("CLUSTERBOT_DATABASE_URL", "postgresql+asyncpg://bot:inline@db/bot")
    with pytest.raises(ConfigError, match="give it once"):
        load_settings("serve")
    monkeypatch.setenv("CLUSTERBOT_DATABASE_URL", "sqlite+aiosqlite:///x.db")
    with pytest.raises(ConfigError, match="applies to PostgreSQL only"):
        load_settings("serve")


def test_the_digest_cron_is_a_crontab_line_in_a_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    valid(monkeypatch)
    settings = load_settings("serve")
    assert (settings.digest_cron, settings.digest_timezone) == ("0 9 * * mon", "UTC")
    monkeypatch.setenv("CLUSTERBOT_DIGEST_CRON", "0 9 * * someday")
    monkeypatch.setenv("CLUSTERBOT_DIGEST_TIMEZONE", "Europe/Berlin")
    with pytest.raises(ConfigError) as caught:
        load_settings("serve")
    [problem] = caught.value.problems
    assert "digest_cron '0 9 * * someday' is not a crontab line" in problem
    monkeypatch.setenv("CLUSTERBOT_DIGEST_CRON", "off")  # no digest
    monkeypatch.setenv("CLUSTERBOT_DIGEST_TIMEZONE", "Mars/Olympus")
    assert load_settings("serve").digest_cron == "off"
    monkeypatch.setenv("CLUSTERBOT_DIGEST_CRON", "30 8 * * fri")
    with pytest.raises(ConfigError) as zone:
        load_settings("serve")
    assert "'Mars/Olympus' is not a zone of the tz database" in zone.value.problems[0]
