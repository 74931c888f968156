"""docs/DEPLOY.md as a new user follows it: its rehearsal block runs as written (the stand-ins
for Slack and Google, secrets as sm:// references read from the simulator's Secret Manager,
`migrate` on a Cloud-SQL-style socket URL, `check-config`, `serve`, `/readyz`, one
`/cluster list`), deploy.sh refuses what would lose data or leak a secret, and the custom
role names every permission the guide explains."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from tests.conftest import require
from tests.support.ports import free_port
from tests.support.postgres import fresh_database

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "DEPLOY.md").read_text()
PGSOCKET = Path("/var/run/postgresql")


def rehearsal() -> str:
    block = GUIDE.split("<!-- rehearsal -->", 1)[1].split("<!-- /rehearsal -->", 1)[0]
    return block.strip().removeprefix("```sh").removesuffix("```")


def test_the_rehearsal_runs_as_written(tmp_path: Path) -> None:
    require(shutil.which("psql") is not None, "psql (PostgreSQL's client)")
    require((PGSOCKET / ".s.PGSQL.5432").exists(), f"PostgreSQL's socket in {PGSOCKET}")
    script = tmp_path / "rehearsal.sh"
    script.write_text(rehearsal())
    # a socket's path must stay under 108 bytes (sockaddr_un), as /cloudsql/P:R:I/... does
    sockets = Path(tempfile.mkdtemp(prefix="cs", dir="/tmp"))
    with fresh_database() as url:
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(tmp_path),
            "SANDBOX": str(free_port()),
            "BOT": str(free_port()),
            "DB": url.rsplit("/", 1)[1],
            "SOCKETS": str(sockets),
            "PGSOCKET": str(PGSOCKET),
        }
        result = subprocess.run(
            ["bash", str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    shutil.rmtree(sockets, ignore_errors=True)
    logs = "".join(
        f"\n--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(tmp_path.glob("*.log"))
    )
    assert result.returncode == 0, result.stdout + result.stderr + logs
    out = result.stdout
    assert re.search(r"database postgresql\+asyncpg:///cb_\w+ is at revision \d+, the newest", out)
    socket = "?host=" + env["SOCKETS"] + "/demo-project:us-central1:clusterbot"
    assert f"postgresql+asyncpg://postgres:********@/{env['DB']}{socket}" in out
    assert (
        "SLACK_BOT_TOKEN" in out
        and "******** (from sm://demo-project/slack-bot-token#latest)" in out
    )
    assert "configuration is valid: HTTP mode" in out
    assert '"credentials": true' in out and '"targets": true' in out
    assert "/cluster list answered alice with train01 in it" in out
    assert "any-password-trust-auth-ignores" not in out + result.stderr + logs


def deploy(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "DRY_RUN": "1"}
    return subprocess.run(
        ["bash", str(ROOT / "docs/deploy/appengine/deploy.sh"), "policy.toml"],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


SETTINGS = {
    "PROJECT": "my-project",
    "CLUSTERBOT_TARGETS": "my-project/us-central1",
    "CLUSTERBOT_ALERT_CHANNEL": "C0123ABCD",
    "CLOUD_SQL_INSTANCE": "my-project:us-central1:clusterbot",
}


def test_deploy_sh_fills_app_yaml_with_references_and_the_cloud_sql_socket(tmp_path: Path) -> None:
    result = deploy(tmp_path, **SETTINGS)
    assert result.returncode == 0, result.stderr
    filled = yaml.safe_load(result.stdout)
    assert filled["service"] == "clusterbot"
    assert filled["service_account"] == "clusterbot@my-project.iam.gserviceaccount.com"
    assert filled["beta_settings"] == {"cloud_sql_instances": "my-project:us-central1:clusterbot"}
    variables = filled["env_variables"]
    assert variables["SLACK_BOT_TOKEN"] == "sm://my-project/slack-bot-token"
    assert variables["SLACK_SIGNING_SECRET"] == "sm://my-project/slack-signing-secret"
    assert variables["CLUSTERBOT_DATABASE_PASSWORD"] == "sm://my-project/clusterbot-db-password"
    assert variables["CLUSTERBOT_DATABASE_URL"] == (
        "postgresql+asyncpg://clusterbot@/clusterbot?host=/cloudsql/my-project:us-central1:clusterbot"
    )
    assert "${" not in yaml.safe_dump(filled)


def test_deploy_sh_refuses_to_lose_data_or_hold_a_secret(tmp_path: Path) -> None:
    without = {k: v for k, v in SETTINGS.items() if k != "CLOUD_SQL_INSTANCE"}
    result = deploy(tmp_path, **without)
    assert result.returncode == 2
    assert result.stderr.startswith("deploy.sh: set CLOUD_SQL_INSTANCE to PROJECT:REGION:INSTANCE")
    assert len(result.stderr.strip().splitlines()) == 1
    sqlite = deploy(tmp_path, **without, CLUSTERBOT_DATABASE_URL="sqlite+aiosqlite:///x.db")
    assert sqlite.returncode == 2 and "keeps no disk" in sqlite.stderr
    inline = deploy(
        tmp_path, **without, CLUSTERBOT_DATABASE_URL="postgresql+asyncpg://bot:hunter2@db/bot"
    )
    assert inline.returncode == 2 and "holds a password" in inline.stderr
    value = deploy(tmp_path, **SETTINGS, BOT_TOKEN_REF="xoxb-1234-abcd")
    assert value.returncode == 2
    assert "BOT_TOKEN_REF must be a Secret Manager reference" in value.stderr
    assert "xoxb-1234" not in value.stdout


def test_the_custom_role_holds_the_permissions_the_guide_explains() -> None:
    role = yaml.safe_load((ROOT / "docs/deploy/iam/clusterbot-role.yaml").read_text())
    explained = set(
        re.findall(r"^\| `((?:aiplatform|monitoring)\.[\w.]+)` \|", GUIDE, flags=re.MULTILINE)
    )
    assert set(role["includedPermissions"]) == explained
    verbs = {p.rsplit(".", 1)[1] for p in explained if ".modelDevelopmentClusters." in p}
    assert verbs == {"list", "get", "update", "delete", "create", "run"}


def test_every_guide_command_names_a_real_setting_and_file() -> None:
    from bot.settings import Settings, env_name

    known = {env_name(field) for field in Settings.model_fields}
    named = set(re.findall(r"\b((?:CLUSTERBOT|SLACK)_[A-Z_]+)=", GUIDE))
    assert named <= known, named - known
    for path in re.findall(r"`((?:deploy|docs|bot)/[\w./-]+)`", GUIDE):
        assert (ROOT / path).exists(), path


def test_the_manifest_step_sets_every_request_url(tmp_path: Path) -> None:
    [line] = [ln for ln in GUIDE.splitlines() if ln.startswith('sed "s#https://YOUR-HOST#')]
    url = "https://clusterbot-dot-my-project.uc.r.appspot.com"
    (tmp_path / "docs" / "deploy" / "slack").mkdir(parents=True)  # the line as written, in a copy
    shutil.copy(
        ROOT / "docs/deploy/slack/manifest.yaml", tmp_path / "docs/deploy/slack/manifest.yaml"
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "URL": url}
    subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, check=True, timeout=30)
    manifest = yaml.safe_load((tmp_path / "manifest.yaml").read_text())
    settings, features = manifest["settings"], manifest["features"]
    urls = [
        settings["event_subscriptions"]["request_url"],
        settings["interactivity"]["request_url"],
        settings["interactivity"]["message_menu_options_url"],
        *(c["url"] for c in features["slash_commands"]),
    ]
    assert urls == [f"{url}/slack/events"] * 4


def test_the_image_check_is_a_make_target_and_parses() -> None:
    script = ROOT / "docs/deploy/image/check.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    dry = subprocess.run(
        ["make", "-n", "image-check"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert dry.returncode == 0 and "docs/deploy/image/check.sh" in dry.stdout
