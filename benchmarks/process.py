"""Run `clusterbot simulator` in its own process, as the real control plane is remote."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def simulator_process(fixtures: dict[str, Any], page_max: int = 100) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fixtures.json"
        path.write_text(json.dumps(fixtures))
        port = free_port()
        command = [sys.executable, "-m", "bot", "simulator", "--port", str(port)]
        command += ["--fixtures", str(path), "--page-max", str(page_max)]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(f"{url}/_sim/config", timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise RuntimeError("the simulator did not start") from None
                    time.sleep(0.1)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=10)
