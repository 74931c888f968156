"""A PostgreSQL server of a test's own, on a free port, that the test stops and starts again:
a database outage as replicas meet it in production (connections refused, then back), which
the shared server on 5432 cannot give without taking every other test down with it.

It is made from the machine's own PostgreSQL binaries (Debian's ``/usr/lib/postgresql``);
PostgreSQL refuses to run as root, so as root it runs as the ``postgres`` user."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import require
from tests.support.ports import free_port
from tests.support.processes import wait_until


def _bindir() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    return found[0].parent if found else None


class PrivatePostgres:
    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir = bindir
        self.data = root / "data"
        self.port = free_port()
        self.log = root / "postgres.log"

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=180)

    def init(self) -> None:
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"
        )

    def start(self) -> None:
        """Start it and wait until it accepts (two minutes at most: a loaded machine's crash
        recovery after an immediate stop); a start that fails says why, from its log."""
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''"
        ctl = str(self.bindir / "pg_ctl")
        try:
            self._run(ctl, "-D", str(self.data), "-l", str(self.log), "-o", options, "-w",
                      "-t", "120", "start")  # fmt: skip
        except subprocess.CalledProcessError as error:
            said = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"the private PostgreSQL on port {self.port} did not start "
                f"({error.stderr.decode(errors='replace').strip()}); its log ends:\n{said}"
            ) from error

    def stop(self) -> None:
        """Stop at once, connections cut: what a replica sees when its database goes away."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def accepting(self) -> bool:
        done = subprocess.run(
            [str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
            capture_output=True,
        )
        return done.returncode == 0


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A started server of the test's own, removed afterwards. Skipped where the machine has
    no PostgreSQL binaries, a failure under CI=true."""
    bindir = _bindir()
    require(bindir is not None, "PostgreSQL's binaries in /usr/lib/postgresql")
    assert bindir is not None
    root = Path(tempfile.mkdtemp(prefix="cb-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    server = PrivatePostgres(bindir, root)
    try:
        server.init()
        server.start()
        wait_until(server.accepting, limit=30, what="the private PostgreSQL to accept")
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
