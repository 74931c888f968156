"""Run `clusterbot simulator` in its own process, as the real control plane is remote."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.ports import free_port


@contextmanager
def simulator_process(
    fixtures: dict[str, Any], page_max: int = 100, extra: tuple[str, ...] = ()
) -> Iterator[tuple[str, int]]:
    """The simulator's URL and process id (to read its CPU)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fixtures.json"
        path.write_text(json.dumps(fixtures))
        del fixtures  # the process has them now: a caller that lets go frees them
        log = Path(folder) / "simulator.log"
        port = free_port()
        command = [sys.executable, "-m", "bot", "simulator", "--port", str(port)]
        command += ["--fixtures", str(path), "--page-max", str(page_max), *extra]
        with log.open("w") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"{url}/_sim/config", timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        tail = log.read_text()[-1500:]
                        raise RuntimeError(f"the simulator did not start:\n{tail}") from None
                    time.sleep(0.1)
            yield url, process.pid
        finally:
            process.terminate()
            process.wait(timeout=10)
