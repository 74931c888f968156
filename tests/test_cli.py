"""The installed `clusterbot` command, run as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.factories import cluster_doc
from tests.support.ports import free_port
from tests.test_store import HEAD


def wait_for(url: str, deadline: float = 20.0) -> None:
    end = time.monotonic() + deadline
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


def get(url: str, token: str | None = "t") -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def simulator_process(tmp_path: Path) -> Iterator[str]:
    fixtures = tmp_path / "fixtures.json"
    fixtures.write_text(
        json.dumps({"clusters": [cluster_doc(cluster_id=f"c{i}") for i in range(3)]})
    )
    port = free_port()
    log = (tmp_path / "simulator.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot",
            "simulator",
            "--port",
            str(port),
            "--fixtures",
            str(fixtures),
            "--page-max",
            "2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/_sim/requests")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def test_simulator_command_serves_the_api(simulator_process: str) -> None:
    parent = "projects/demo-project/locations/us-central1"
    base = f"{simulator_process}/v1beta1/{parent}/modelDevelopmentClusters"
    status, body = get(base, token=None)
    assert status == 401 and body["error"]["status"] == "UNAUTHENTICATED"  # type: ignore[index]
    status, page = get(base)
    assert status == 200
    assert [c["name"].rsplit("/", 1)[1] for c in page["modelDevelopmentClusters"]] == ["c0", "c1"]  # type: ignore[attr-defined,index]
    status, rest = get(f"{base}?pageToken={page['nextPageToken']}")
    assert status == 200 and "nextPageToken" not in rest
    _, log = get(f"{simulator_process}/_sim/requests", token=None)
    assert [r["status"] for r in log["requests"]] == [401, 200, 200]  # type: ignore[index]


def test_bad_fixtures_file_is_a_clear_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot", "simulator", "--fixtures", str(tmp_path / "none.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "cannot load fixtures" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_lists_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "simulator" in result.stdout and "check-config" in result.stdout


def test_demo_removes_its_temporary_data_on_exit(tmp_path: Path) -> None:
    import signal as signals

    port = free_port()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "demo", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(f"http://127.0.0.1:{port}/healthz")
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("clusterbot-demo-")]
    finally:
        process.send_signal(signals.SIGINT)
        process.wait(timeout=30)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("clusterbot-demo-")]


def test_sweep_once_keeps_its_database_in_the_state_folder(tmp_path: Path) -> None:
    """Never in the working directory: a cron job and `serve` share one history."""
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(state),
        "CLUSTERBOT_TARGETS": "demo-project/us-central1",
        "CLUSTERBOT_VERTEX_API_URL": "http://127.0.0.1:9",
        "CLUSTERBOT_VERTEX_STATIC_TOKEN": "x",
        "CLUSTERBOT_VERTEX_RETRY_DEADLINE": "0.5",
    }
    result = subprocess.run(
        [sys.executable, "-m", "bot", "sweep", "--once"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # nothing answers at the control plane's address: the sweep ran, read no target, and
    # says so with exit 2 (a cron job must not take it for an empty fleet)
    assert result.returncode == 2, result.stderr
    assert "clusterbot sweep: no target could be read (demo-project/us-central1: " in result.stderr
    assert (state / "clusterbot" / "clusterbot.db").is_file()
    assert list(work.iterdir()) == []


def test_migrate_brings_the_database_to_the_newest_revision(tmp_path: Path) -> None:
    database = tmp_path / "bot.db"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "CLUSTERBOT_DATABASE_URL": f"sqlite+aiosqlite:///{database}",
    }
    runs = [
        subprocess.run(
            [sys.executable, "-m", "bot", "migrate"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert run.stdout == f"database {database} is at revision {HEAD}, the newest\n"
    # the first run migrated and said so in one log line; the second had nothing to do
    assert f"migrated from revision none to {HEAD}" in runs[0].stderr
    assert "migrated" not in runs[1].stderr
    unreachable = {**env, "CLUSTERBOT_DATABASE_URL": "postgresql+asyncpg://u:pw@127.0.0.1:9/x"}
    failed = subprocess.run(
        [sys.executable, "-m", "bot", "migrate"],
        env=unreachable,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert failed.stderr.strip().splitlines() == [
        "clusterbot migrate: the database postgresql+asyncpg://127.0.0.1/x could not be "
        "migrated: ConnectionRefusedError"
    ]
