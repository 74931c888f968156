"""Shared fixtures: a guard against the real internet, a manual clock, the simulator on loopback."""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from bot.sandbox.controlplane import DEMO_FIXTURES, Durations, SimulatorState, create_app
from bot.vertex.auth import StaticToken
from bot.vertex.client import VertexClient
from bot.vertex.retry import RetryPolicy
from tests import quick

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _loopback_only(address: Any) -> None:
    if isinstance(address, tuple):
        host = address[0]
        try:
            if ipaddress.ip_address(host).is_loopback:
                return
        except ValueError:
            if host == "localhost":
                return
        raise RuntimeError(f"a test tried to reach {address!r}; tests stay on loopback")


@pytest.fixture(autouse=True, scope="session")
def _no_internet() -> Iterator[None]:
    """Fail any test that tries to reach a non-loopback address."""

    def connect(self: socket.socket, address: Any) -> None:
        _loopback_only(address)
        _real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _loopback_only(address)
        return _real_connect_ex(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    yield
    socket.socket.connect = _real_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _real_connect_ex  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A test that runs the CLI's ``main`` configures the root logger (its handler's secret
    filter turns a record's traceback into text); the next test in the process starts from
    the logging it found."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


class ManualClock:
    """Monotonic seconds and a wall clock that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.start = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)

    def __call__(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return self.start + timedelta(seconds=self.now - 1000.0)

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Simulator:
    url: str
    state: SimulatorState
    clock: ManualClock
    session: aiohttp.ClientSession

    async def admin(self, method: str, path: str, body: Any = None) -> Any:
        async with self.session.request(method, f"{self.url}/_sim/{path}", json=body) as reply:
            assert reply.status < 300, await reply.text()
            return await reply.json()

    async def fault(self, **spec: Any) -> None:
        await self.admin("POST", "faults", spec)

    async def requests(self, method: str | None = None, path: str | None = None) -> list[Any]:
        query = "&".join(f"{k}={v}" for k, v in (("method", method), ("path", path)) if v)
        return list((await self.admin("GET", f"requests?{query}"))["requests"])


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def simulator(clock: ManualClock) -> AsyncIterator[Simulator]:
    state = SimulatorState(
        clock=clock, wall=clock.wall, durations=Durations(create=30, update=20, delete=30)
    )
    state.load_fixtures(json.loads(DEMO_FIXTURES.read_text()))
    server = TestServer(create_app(state), host="127.0.0.1")
    await server.start_server()
    async with aiohttp.ClientSession() as session:
        yield Simulator(str(server.make_url("")).rstrip("/"), state, clock, session)
    await server.close()


class RecordedSleeps:
    """An injected ``asyncio.sleep`` that records each wait and moves the clock instead."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds)


@pytest.fixture
def sleeps(clock: ManualClock) -> RecordedSleeps:
    return RecordedSleeps(clock)


@pytest.fixture
async def client(simulator: Simulator, sleeps: RecordedSleeps) -> AsyncIterator[VertexClient]:
    policy = RetryPolicy(initial=1.0, multiplier=2.0, maximum=60.0, deadline=120.0)
    async with VertexClient(
        StaticToken("test-token"),
        base_url=simulator.url,
        retry=policy,
        sleep=sleeps,
        clock=simulator.clock,
    ) as vertex:
        yield vertex


def require(available: bool, what: str) -> None:
    """Skip when a machine service is absent locally; under CI=true its absence is a failure."""
    import os

    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is required under CI=true but is not available")
    pytest.skip(f"{what} is not available")


@pytest.fixture
async def stack() -> AsyncIterator[Any]:
    from tests.support.slack_stack import slack_stack

    async with slack_stack() as running:
        yield running


def pytest_addoption(parser: pytest.Parser) -> None:
    quick.add_option(parser)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    quick.deselect(config, items)
