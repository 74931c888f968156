"""`clusterbot check-config` after the settings and the policy were read: a Google Cloud
token, and each target listed once with it, so that missing credentials, a missing IAM grant
or an API not enabled show before anything is deployed."""

from __future__ import annotations

import asyncio

from bot.settings import Settings, say_invalid
from bot.vertex.auth import TokenSource, token_source

TOKEN_DEADLINE = 20.0  # seconds obtaining a token may take
CHECK_DEADLINE = 20.0  # seconds each target's listing may take


async def token_problem(tokens: TokenSource) -> str | None:
    """Whether a control-plane token can be obtained; the problem in words if not."""
    from handlers.domain.errors import CredentialsError

    try:
        async with asyncio.timeout(TOKEN_DEADLINE):
            await tokens.token()
    except CredentialsError as error:
        return f"Google Cloud credentials: {error.user_message}"
    except TimeoutError:
        return f"Google Cloud credentials: obtaining a token took more than {TOKEN_DEADLINE:g} s"
    return None


async def target_problems(settings: Settings, tokens: TokenSource) -> list[str]:
    """Each target that cannot be listed with these credentials, and why: a missing IAM
    grant or API shows here, not first at a sweep."""
    from bot.vertex.client import VertexClient
    from bot.vertex.retry import RetryPolicy

    retry = RetryPolicy(deadline=min(settings.vertex_retry_deadline, CHECK_DEADLINE))
    async with VertexClient(tokens, base_url=settings.vertex_api_url, retry=retry) as client:
        listings = await client.list_kept(settings.targets, lambda _c: None, CHECK_DEADLINE)
    return [
        f"CLUSTERBOT_TARGETS: cannot list {k.target}: {k.error.user_message}"
        for k in listings
        if k.error is not None
    ]


async def problems_of(settings: Settings) -> list[str]:
    """The token first; with one, each target listed with that same token."""
    static = settings.vertex_static_token
    tokens = token_source(static.get_secret_value() if static is not None else None)
    problem = await token_problem(tokens)
    return [problem] if problem is not None else await target_problems(settings, tokens)


def check_config(settings: Settings) -> int:
    """Print the settings redacted, and every problem found; the exit status."""
    problems = asyncio.run(problems_of(settings))
    shown = settings.redacted()
    width = max(len(name) for name in shown)
    for name, value in shown.items():
        print(f"{name.ljust(width)}  {value}")
    if problems:
        say_invalid("check-config", problems, lead="\n")
        return 2
    mode = "Socket Mode" if settings.socket_mode else f"HTTP mode on port {settings.port}"
    print(f"\nconfiguration is valid: {mode}, {len(settings.targets)} target(s), each listed")
    return 0
