"""The ``clusterbot`` command: serve | release | demo | sandbox | simulator | sweep | migrate |
check-config.

Imports are lazy: ``--help`` and argument errors load almost nothing, and ``serve``, ``sweep``,
``migrate`` and ``check-config`` never load the local stand-ins (which the production image
leaves out).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:
    from bot.settings import Mode, Settings
    from handlers.policy import Policy

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
DEMO_FIXTURES = Path(__file__).parent / "sandbox" / "controlplane" / "demo_clusters.json"


def _stand_ins_missing(command: str) -> bool:
    """The production image leaves the local stand-ins out; say so in one line."""
    import importlib.util

    if importlib.util.find_spec("bot.sandbox") is not None:
        return False
    print(
        f"clusterbot {command}: the local stand-ins are not installed here (the production "
        "image leaves them out); run it from a source checkout, e.g. `make demo`",
        file=sys.stderr,
    )
    return True


def _simulator(args: argparse.Namespace) -> int:
    if _stand_ins_missing("simulator"):
        return 2
    import json

    from aiohttp import web

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
    if _stand_ins_missing("demo"):
        return 2
    from bot.demo import run_demo

    run_demo(args.host, args.port, Path(args.data_dir) if args.data_dir else None)
    return 0


def _sandbox(args: argparse.Namespace) -> int:
    if _stand_ins_missing("sandbox"):
        return 2
    from bot.demo import run_sandbox

    run_sandbox(args.host, args.port)
    return 0


def _configuration(
    command: str, mode: Mode = "serve", *, one_line: bool = False
) -> tuple[Settings, Policy] | None:
    """Settings and policy, or None after printing every problem (of both) to stderr; with
    ``one_line``, a single problem is one line (a refused start is one log entry)."""
    from bot.settings import ConfigError, load_settings, say_invalid
    from handlers.policy import PolicyError, load_policy

    problems: list[str] = []
    settings: Settings | None = None
    try:
        settings = load_settings(mode)
    except ConfigError as error:
        problems += error.problems
    policy_file = settings.policy_file if settings is not None else _policy_path_from_environment()
    policy = None
    try:
        from handlers.capabilities import REGISTRY

        policy = load_policy(policy_file, REGISTRY.sections.values())
    except PolicyError as error:
        problems.append(str(error))
    if settings is not None and policy is not None and not problems:
        from bot.logs import configure

        # the secrets now known, those read from Secret Manager too, are kept out of logs
        configure(settings.log_level, settings.secret_values())
        return settings, policy
    if one_line and len(problems) == 1:
        print(f"clusterbot {command}: cannot start: {problems[0]}", file=sys.stderr)
        return None
    say_invalid(command, problems)
    return None


def _policy_path_from_environment() -> Path | None:
    """The policy file named in the environment, when settings could not be read whole."""
    value = os.environ.get("CLUSTERBOT_POLICY_FILE", "").strip()
    path = Path(value) if value else None
    return path if path is not None and path.is_file() else None


def _serve(_args: argparse.Namespace) -> int:
    loaded = _configuration("serve", one_line=True)
    if loaded is None:
        return 2
    from bot.serve import run_service

    return run_service(*loaded)


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
    import asyncio

    from bot.sweep_once import SweepFailedError, sweep_once

    try:
        print(asyncio.run(sweep_once(*loaded, as_json_output=args.json)))
    except SweepFailedError as error:
        print(f"clusterbot sweep: {error}", file=sys.stderr)
        return 2
    return 0


def _migrate(_args: argparse.Namespace) -> int:
    from bot.settings import ConfigError, load_settings

    try:
        settings = load_settings("migrate")
    except ConfigError as error:
        print("clusterbot migrate: configuration is invalid:", file=sys.stderr)
        for problem in error.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    import asyncio

    from bot.store import Store, shown

    async def upgrade() -> str:
        store = Store.from_url(settings.database_url)
        try:
            return await store.migrate()
        finally:
            await store.close()

    database = shown(settings.database_url)
    try:
        revision = asyncio.run(upgrade())
    except Exception as error:
        print(
            f"clusterbot migrate: the database {database} could not be migrated: "
            f"{type(error).__name__}",
            file=sys.stderr,
        )
        return 1
    print(f"database {database} is at revision {revision}, the newest")
    return 0


def _check_config(_args: argparse.Namespace) -> int:
    loaded = _configuration("check-config")
    if loaded is None:
        return 2
    from bot.checks import check_config

    return check_config(loaded[0])


def _release(args: argparse.Namespace) -> int:
    from bot.release_cli import run

    return run(args.cluster, args.then, args.timeout, args.url, args.audience)


def build_parser() -> argparse.ArgumentParser:
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

    release = commands.add_parser(
        "release",
        help="a pipeline's last step: scale to zero or delete a cluster once its queue drains",
        description="Ask the running service (POST /api/v1/release, with a Google-signed ID "
        "token from this step's credentials) to scale CLUSTER to zero or delete it once its "
        "Slurm queue is empty. Callers in the policy's [pipelines] are pre-approved.",
    )
    release.add_argument("cluster", metavar="CLUSTER")
    release.add_argument("--when-drained", action="store_true", required=True)
    release.add_argument("--then", required=True, choices=("scale-to-zero", "delete"))
    release.add_argument("--timeout", default="6h", help="how long to wait (default 6h)")
    release.add_argument("--url", help="the service's base URL (default CLUSTERBOT_URL)")
    release.add_argument("--audience", help="the ID token's audience (default the URL)")
    release.set_defaults(run=_release)

    demo = commands.add_parser(
        "demo",
        help="the whole stack locally: fake Slack page, control-plane simulator and the bot",
        description="Run a local Slack stand-in, the control-plane simulator and the bot in "
        "one process; open the printed URL. Needs no credentials and no network.",
    )
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8080)
    demo.add_argument(
        "--data-dir",
        default=None,
        help="keep the demo's database in this folder (default: a temporary folder, removed "
        "on exit)",
    )
    demo.set_defaults(run=_demo)

    sandbox = commands.add_parser(
        "sandbox",
        help="the Slack stand-in and the control-plane simulator, with no bot",
        description="Serve the Slack stand-in (page at /, Web API at /api/) and the "
        "control-plane simulator (at /vertex) for real `clusterbot serve` replicas to attach "
        "to; GET /sandbox/api/config gives the token and signing secret to give them.",
    )
    sandbox.add_argument("--host", default="127.0.0.1")
    sandbox.add_argument("--port", type=int, default=8080)
    sandbox.set_defaults(run=_sandbox)

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
        description="Observe every cluster of CLUSTERBOT_TARGETS once, update idle records in "
        "the same database as `serve`, post due alerts when Slack is configured, and print "
        "the report.",
    )
    sweep.add_argument("--once", action="store_true", help="run one sweep and exit")
    sweep.add_argument("--json", action="store_true", help="print the report as JSON")
    sweep.set_defaults(run=_sweep)

    migrate = commands.add_parser(
        "migrate",
        help="bring the database's schema to the newest revision (serve also does on start)",
        description="Apply the database migrations CLUSTERBOT_DATABASE_URL lacks, one replica "
        "at a time, and say which revision it is at.",
    )
    migrate.set_defaults(run=_migrate)

    check = commands.add_parser(
        "check-config",
        help="validate the environment's settings and print them, secrets redacted",
        description="Validate settings for `clusterbot serve`, including that a Google Cloud "
        "token can be obtained; exit 2 listing every problem.",
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
    from bot.memory import keep_large_blocks_apart

    keep_large_blocks_apart()  # before any large block: see bot/memory.py

    level = os.environ.get("CLUSTERBOT_LOG_LEVEL", "INFO").strip().upper()
    # A bad level is reported with the other settings; meanwhile log at INFO.
    configure(level if level in LOG_LEVELS else "INFO", secrets_in_environment())
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
