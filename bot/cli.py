"""The ``clusterbot`` command: serve | demo | simulator | check-config."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

from aiohttp import web

from bot.settings import ConfigError, Mode, Settings, load_settings
from handlers.policy import Policy


def _simulator(args: argparse.Namespace) -> int:
    from bot.sandbox.controlplane import Durations, SimulatorState, create_app

    state = SimulatorState(
        durations=Durations(
            create=args.create_seconds, update=args.update_seconds, delete=args.delete_seconds
        ),
        page_max=args.page_max,
        required_token=args.token,
    )
    try:
        state.load_fixtures(json.loads(Path(args.fixtures).read_text()))
    except (OSError, ValueError) as error:
        print(
            f"clusterbot simulator: cannot load fixtures {args.fixtures}: {error}", file=sys.stderr
        )
        return 2
    url = f"http://{args.host}:{args.port}"
    print(f"Control-plane simulator on {url}", flush=True)
    print(
        f"  clusters:  curl -H 'Authorization: Bearer x' {url}/v1beta1/projects/demo-project/"
        "locations/us-central1/modelDevelopmentClusters",
        flush=True,
    )
    print(f"  requests:  curl {url}/_sim/requests", flush=True)
    web.run_app(create_app(state), host=args.host, port=args.port, print=None)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from bot.demo import run_demo

    run_demo(args.host, args.port)
    return 0


def _configuration(command: str, mode: Mode = "serve") -> tuple[Settings, Policy] | None:
    """Settings and policy, or None after printing every problem to stderr."""
    from handlers.policy import PolicyError, load_policy

    try:
        settings = load_settings(mode)
    except ConfigError as error:
        problems = error.problems
    else:
        try:
            return settings, load_policy(settings.policy_file)
        except PolicyError as error:
            problems = [str(error)]
    count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
    print(f"clusterbot {command}: configuration is invalid ({count}):", file=sys.stderr)
    for problem in problems:
        print(f"  - {problem}", file=sys.stderr)
    return None


def _serve(_args: argparse.Namespace) -> int:
    loaded = _configuration("serve")
    if loaded is None:
        print("Run `clusterbot check-config` after fixing them.", file=sys.stderr)
        return 2
    from bot.serve import run_service

    run_service(*loaded)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    if not args.once:
        print(
            "clusterbot sweep: only --once is supported here; the service sweeps on its own "
            "schedule (CLUSTERBOT_SWEEP_INTERVAL)",
            file=sys.stderr,
        )
        return 2
    loaded = _configuration("sweep", "sweep")
    if loaded is None:
        return 2
    from bot.sweep_once import sweep_once

    print(asyncio.run(sweep_once(*loaded, as_json_output=args.json)))
    return 0


def _check_config(_args: argparse.Namespace) -> int:
    loaded = _configuration("check-config")
    if loaded is None:
        return 2
    settings, _policy = loaded
    width = max(len(name) for name in settings.redacted())
    for name, value in settings.redacted().items():
        print(f"{name.ljust(width)}  {value}")
    mode = "Socket Mode" if settings.socket_mode else f"HTTP mode on port {settings.port}"
    print(f"\nconfiguration is valid: {mode}, {len(settings.targets)} target(s)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from bot.sandbox.controlplane import DEMO_FIXTURES

    parser = argparse.ArgumentParser(
        prog="clusterbot",
        description="Slack chat-ops for Vertex AI training clusters.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="run the bot (HTTP mode on PORT, or Socket Mode with SLACK_APP_TOKEN)",
        description="Run clusterbot, configured from the environment (see check-config).",
    )
    serve.set_defaults(run=_serve)

    demo = commands.add_parser(
        "demo",
        help="the whole stack locally: fake Slack page, control-plane simulator and the bot",
        description="Run a local Slack stand-in, the control-plane simulator and the bot in "
        "one process; open the printed URL. Needs no credentials and no network.",
    )
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8080)
    demo.set_defaults(run=_demo)

    sim = commands.add_parser(
        "simulator",
        help="run the local control-plane simulator alone",
        description="Serve a local stand-in for the modelDevelopmentClusters API.",
    )
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8085)
    sim.add_argument(
        "--fixtures",
        default=str(DEMO_FIXTURES),
        help="JSON file of projects, clusters and jobs (default: the demo data)",
    )
    sim.add_argument(
        "--token", default=None, help="accept only this bearer token (default: any non-empty token)"
    )
    sim.add_argument("--update-seconds", type=float, default=20.0)
    sim.add_argument("--delete-seconds", type=float, default=30.0)
    sim.add_argument("--create-seconds", type=float, default=60.0)
    sim.add_argument("--page-max", type=int, default=100, help="largest page a list returns")
    sim.set_defaults(run=_simulator)

    sweep = commands.add_parser(
        "sweep",
        help="one idle sweep now, reported on stdout (for cron and pipelines)",
        description="Observe every cluster of CLUSTERBOT_TARGETS once, update idle records, "
        "post due alerts when Slack is configured, and print the report.",
    )
    sweep.add_argument("--once", action="store_true", help="run one sweep and exit")
    sweep.add_argument("--json", action="store_true", help="print the report as JSON")
    sweep.set_defaults(run=_sweep)

    check = commands.add_parser(
        "check-config",
        help="validate the environment's settings and print them, secrets redacted",
        description="Validate settings for `clusterbot serve`; exit 2 listing every problem.",
    )
    check.set_defaults(run=_check_config)
    return parser


SECRET_VARIABLES = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "CLUSTERBOT_VERTEX_STATIC_TOKEN",
)


def secrets_in_environment() -> list[str]:
    """Values no log line may contain: the secrets, and the database password."""
    values = [os.environ.get(name, "") for name in SECRET_VARIABLES]
    database = urlparse(os.environ.get("CLUSTERBOT_DATABASE_URL", ""))
    return [v for v in [*values, database.password or ""] if v]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from bot.logs import configure

    configure(os.environ.get("CLUSTERBOT_LOG_LEVEL", "INFO").upper(), secrets_in_environment())
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
