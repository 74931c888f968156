"""`clusterbot check-config` after the settings and the policy were read: a Google Cloud
token, and each target listed once with it, so that missing credentials, a missing IAM grant
or an API not enabled show before anything is deployed."""

from __future__ import annotations

import asyncio
import sys

from bot.settings import Settings


async def token_problem(settings: Settings) -> str | None:
    """Whether a control-plane token can be obtained; the problem in words if not."""
    from bot.vertex.auth import GoogleCredentialsToken, StaticToken, TokenSource
    from bot.vertex.errors import CredentialsError

    source: TokenSource = (
        StaticToken(settings.vertex_static_token.get_secret_value())
        if settings.vertex_static_token is not None
        else GoogleCredentialsToken()
    )
    try:
        async with asyncio.timeout(20):
            await source.token()
    except CredentialsError as error:
        return f"Google Cloud credentials: {error.user_message}"
    except TimeoutError:
        return "Google Cloud credentials: obtaining a token took more than 20 s"
    return None


CHECK_DEADLINE = 20.0  # seconds each target's listing may take in check-config


async def target_problems(settings: Settings) -> list[str]:
    """Each target that cannot be listed with these credentials, and why: a missing IAM
    grant or API shows here, not first at a sweep."""
    from bot.vertex.auth import GoogleCredentialsToken, StaticToken, TokenSource
    from bot.vertex.client import VertexClient
    from bot.vertex.retry import RetryPolicy

    tokens: TokenSource = (
        StaticToken(settings.vertex_static_token.get_secret_value())
        if settings.vertex_static_token is not None
        else GoogleCredentialsToken()
    )
    retry = RetryPolicy(deadline=min(settings.vertex_retry_deadline, CHECK_DEADLINE))
    async with VertexClient(tokens, base_url=settings.vertex_api_url, retry=retry) as client:
        listings = await client.list_kept(settings.targets, lambda _c: None, CHECK_DEADLINE)
    return [
        f"CLUSTERBOT_TARGETS: cannot list {k.target}: {k.error.user_message}"
        for k in listings
        if k.error is not None
    ]


def check_config(settings: Settings) -> int:
    """Print the settings redacted, and every problem found; the exit status."""
    problem = asyncio.run(token_problem(settings))
    problems = [problem] if problem is not None else asyncio.run(target_problems(settings))
    width = max(len(name) for name in settings.redacted())
    for name, value in settings.redacted().items():
        print(f"{name.ljust(width)}  {value}")
    if problems:
        count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
        print(f"\nclusterbot check-config: configuration is invalid ({count}):", file=sys.stderr)
        for line in problems:
            print(f"  - {line}", file=sys.stderr)
        return 2
    mode = "Socket Mode" if settings.socket_mode else f"HTTP mode on port {settings.port}"
    print(f"\nconfiguration is valid: {mode}, {len(settings.targets)} target(s), each listed")
    return 0
