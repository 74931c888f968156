"""No Google Cloud credentials, and other configuration mistakes, said in plain words.

google-auth looks for Application Default Credentials in GOOGLE_APPLICATION_CREDENTIALS, in
gcloud's folder under HOME, then on a metadata server; the tests point HOME at an empty
folder and set NO_GCE_CHECK, so none is found and nothing is asked of the network.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.app import ClusterbotService
from bot.settings import Settings
from handlers.domain.names import Target
from handlers.policy import Policy
from tests.conftest import Simulator
from tests.support.demo_stack import text_of


@pytest.fixture
def no_adc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.delenv("CLOUDSDK_CONFIG", raising=False)
    # google-auth reads NO_GCE_CHECK once, at import: in this process, say it again
    from google.auth.compute_engine import _metadata

    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "NO_GCE_CHECK": "true",
    }


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_check_config_lists_missing_credentials(no_adc: dict[str, str], tmp_path: Path) -> None:
    env = {
        **no_adc,
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s",
        "CLUSTERBOT_TARGETS": "demo-project/us-central1",
        "CLUSTERBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}",
    }
    result = run(["check-config"], env)
    assert result.returncode == 2
    assert "configuration is invalid (1 problem)" in result.stderr
    assert (
        "Google Cloud credentials: clusterbot cannot authenticate to Google Cloud" in result.stderr
    )
    assert "no Application Default Credentials were found" in result.stderr
    assert "GOOGLE_APPLICATION_CREDENTIALS" in result.stderr
    assert "Traceback" not in result.stderr


def test_sweep_once_without_credentials_is_one_line(no_adc: dict[str, str], tmp_path: Path) -> None:
    env = {
        **no_adc,
        "CLUSTERBOT_TARGETS": "demo-project/us-central1",
        "CLUSTERBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}",
    }
    result = run(["sweep", "--once"], env)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("clusterbot sweep:")]
    assert len(lines) == 1 and "cannot authenticate to Google Cloud" in lines[0]
    assert "Traceback" not in result.stderr


def test_bad_log_level_and_policy_are_listed_with_the_rest(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[roles]\nwizard = ["U1"]\n')
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "CLUSTERBOT_LOG_LEVEL": "verbose",
        "CLUSTERBOT_POLICY_FILE": str(policy),
        "SLACK_BOT_TOKEN": "not-a-token",
    }
    result = run(["check-config"], env)
    assert result.returncode == 2
    err = result.stderr
    assert "CLUSTERBOT_LOG_LEVEL: Input should be 'DEBUG', 'INFO', 'WARNING' or 'ERROR'" in err
    assert "SLACK_BOT_TOKEN: must start with xoxb-" in err
    assert "unknown role 'wizard'" in err  # the policy file, in the same list
    assert "configuration is invalid (5 problems)" in err
    assert "Traceback" not in err


async def test_readyz_and_replies_say_why_google_cloud_cannot_be_reached(
    no_adc: dict[str, str], simulator: Simulator, tmp_path: Path
) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from bot.serve import web_app

    settings = Settings(
        targets=[Target("demo-project", "us-central1")],
        vertex_api_url=simulator.url,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}",
        slack_api_url="http://127.0.0.1:9/api/",
        slack_signing_secret=SecretStr("s"),
    )
    service = ClusterbotService(settings, Policy(), tick_seconds=60)
    client = TestClient(TestServer(web_app(service)))
    await client.start_server()
    try:
        reply = await client.get("/readyz")
        body = await reply.json()
        assert reply.status == 503 and body["database"] is True
        assert "no Application Default Credentials were found" in body["credentials"]
        from bot.slack.render import render

        _text, blocks = render(await service.core.reports.clusters())
        shown = text_of({"text": "", "blocks": blocks})
        assert "Could not list demo-project/us-central1: clusterbot cannot authenticate" in shown
        assert "no Application Default Credentials were found" in shown
        assert await simulator.requests() == []  # no request went out without a token
    finally:
        await client.close()
