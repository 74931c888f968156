"""The client's transport: authenticated HTTP to the control plane, retries under AIP-194's
rules, and the look-up that decides what a change without a reply did."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Self, TypeVar

import aiohttp
from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from bot.vertex.auth import TokenSource
from bot.vertex.retry import RetryPolicy, is_retryable, may_have_applied
from handlers.domain.errors import (
    AbortedError,
    AppliedWithoutReplyError,
    MalformedReplyError,
    OutcomeUnknownError,
    TransportError,
    VertexError,
    error_from_response,
)

# (call name, outcome) -> None; outcome is "ok" or a google.rpc status name.
CallObserver = Callable[[str, str], None]
R = TypeVar("R")
# What is read from a successful reply, as it arrives.
Receive = Callable[[aiohttp.ClientResponse], Awaitable[R]]


async def _whole(response: aiohttp.ClientResponse) -> bytes:
    return await response.read()


SERVER_MARGIN = 5.0  # seconds the server's timeout (X-Server-Timeout) is under the client's


def regional_endpoint(region: str) -> str:
    return f"https://{region}-aiplatform.googleapis.com"


def json_object(body: bytes) -> dict[str, Any]:
    """A reply's body as a JSON object (an empty body: an empty object)."""
    try:
        decoded = json.loads(body) if body else {}
    except ValueError as error:
        raise MalformedReplyError("the control plane sent a reply that is not JSON") from error
    if not isinstance(decoded, dict):
        raise MalformedReplyError("the control plane sent a reply that is not a JSON object")
    return decoded


def field_path(error: ValidationError) -> str:
    """``nodePools.0.filestores.0: Input should be a valid string`` for the first problem."""
    first = error.errors()[0]
    path = ".".join(to_camel(p) if isinstance(p, str) else str(p) for p in first["loc"])
    return f"{path or 'the reply'}: {first['msg']}"


M = TypeVar("M", bound=BaseModel)


def read_model(model: type[M], document: Any, what: str) -> M:
    """Validate a reply, turning a schema mismatch into a typed error naming the field."""
    try:
        return model.model_validate(document)
    except ValidationError as error:
        raise _unreadable(what, error) from error


def read_model_json(model: type[M], body: bytes, what: str) -> M:
    """``read_model`` for a reply's bytes, decoded and validated in one step; a body that
    is not a JSON object is reported as such, not as a field at fault."""
    try:
        return model.model_validate_json(body or b"{}")
    except ValidationError as error:
        if any(e["type"] == "json_invalid" or not e["loc"] for e in error.errors()):
            json_object(body)  # raises the same message as every other reply
        raise _unreadable(what, error) from error


def _unreadable(what: str, error: ValidationError) -> MalformedReplyError:
    return MalformedReplyError(
        f"the control plane sent {what} that clusterbot cannot read ({field_path(error)})"
    )


class Transport:
    """Sends requests with a token, retrying reads and never replaying a change blindly."""

    def __init__(
        self,
        tokens: TokenSource,
        *,
        base_url: str | None = None,
        session: aiohttp.ClientSession | None = None,
        retry: RetryPolicy | None = None,
        concurrency: int = 32,
        page_size: int = 100,
        request_timeout: float = 30.0,
        observer: CallObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._tokens = tokens
        self._base_url = base_url.rstrip("/") if base_url else None
        self._session = session
        self._owns_session = session is None
        self._retry = retry or RetryPolicy()
        self._concurrency = max(1, concurrency)
        self._page_size = page_size
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)
        # the server gives up on a call a little before the client does: once the client has
        # stopped waiting for a call, nothing of it can be applied any more
        self._server_timeout = f"{max(1.0, request_timeout - SERVER_MARGIN):g}"
        self._observer = observer
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def check_credentials(self) -> None:
        """Obtain a token now; raises ``CredentialsError`` saying why it cannot."""
        await self._tokens.token()

    def endpoint(self, region: str) -> str:
        return self._base_url or regional_endpoint(region)

    async def _call(
        self,
        call: str,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        json_body: dict[str, Any] | None = None,
        safe: bool,
        already_applied: Callable[[], Awaitable[bool]] | None = None,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """The reply as a JSON object."""
        body = await self._call_raw(
            call,
            method,
            url,
            params=params,
            json_body=json_body,
            safe=safe,
            already_applied=already_applied,
            deadline=deadline,
        )
        return json_object(body)

    async def _call_raw(
        self,
        call: str,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        json_body: dict[str, Any] | None = None,
        safe: bool,
        already_applied: Callable[[], Awaitable[bool]] | None = None,
        deadline: float | None = None,
    ) -> bytes:
        """The reply's bytes, with retries under AIP-194's rules and the look-up after a lost
        reply to a change."""
        return await self._call_reading(
            call,
            method,
            url,
            _whole,
            params=params,
            json_body=json_body,
            safe=safe,
            already_applied=already_applied,
            deadline=deadline,
        )

    async def _call_reading(
        self,
        call: str,
        method: str,
        url: str,
        receive: Receive[R],
        *,
        params: dict[str, str] | None = None,
        json_body: dict[str, Any] | None = None,
        safe: bool,
        already_applied: Callable[[], Awaitable[bool]] | None = None,
        deadline: float | None = None,
    ) -> R:
        """What ``receive`` reads from a successful reply as it arrives; a reply that breaks
        off midway is retried as a lost one is."""
        started = self._clock()
        limit = self._retry.deadline if deadline is None else min(deadline, self._retry.deadline)
        delays = self._retry.delays(self._rng)
        attempts = 0
        while True:
            attempts += 1
            try:
                reply = await self._send(method, url, params, json_body, receive)
            except VertexError as error:
                self._observe(call, error.status)
                ambiguous = may_have_applied(error) or (
                    attempts > 1 and isinstance(error, AbortedError)
                )
                if not safe and ambiguous:
                    # Another replay may not be sent until a look-up shows it did not apply.
                    await self._check_not_applied(error, already_applied)
                if not is_retryable(error, safe=safe or ambiguous):
                    raise
                delay = max(next(delays), error.retry_after or 0.0)
                if self._clock() - started + delay > limit:
                    raise
                await self._sleep(delay)
            else:
                self._observe(call, "ok")
                return reply

    async def _check_not_applied(
        self, error: VertexError, already_applied: Callable[[], Awaitable[bool]] | None
    ) -> None:
        """Return only when a look-up shows that a change which may have reached the server
        did not apply; otherwise raise what the caller must do about it."""
        if already_applied is None:
            raise OutcomeUnknownError(
                "the control plane did not confirm the change, and it may have been applied; "
                "check the cluster before trying again",
                cause=error,
            ) from error
        try:
            applied = await already_applied()
        except VertexError as lookup_error:
            raise OutcomeUnknownError(
                "the control plane did not confirm the change and the cluster could not be "
                f"read to check it ({lookup_error.user_message}); it may have been applied",
                cause=error,
                later=is_retryable(lookup_error, safe=True),
            ) from lookup_error
        if applied:
            raise AppliedWithoutReplyError(
                f"the reply was lost ({error.user_message}), but the cluster shows the change "
                "applied or in progress",
                cause=error,
            ) from error

    async def _send(
        self,
        method: str,
        url: str,
        params: dict[str, str] | None,
        json_body: dict[str, Any] | None,
        receive: Receive[R],
    ) -> R:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        headers = {
            "Authorization": f"Bearer {await self._tokens.token()}",
            # the server stops working on a call the client no longer waits for, so that once
            # its timeout has passed, nothing of it can be applied any more
            "X-Server-Timeout": self._server_timeout,
        }
        try:
            async with self._session.request(
                method, url, params=params, json=json_body, headers=headers, timeout=self._timeout
            ) as response:
                status = response.status
                retry_after = response.headers.get("Retry-After")
                if status < 400:
                    return await receive(response)
                body = await response.read()
        except aiohttp.ClientConnectorError as error:
            host = error.host
            raise TransportError(
                f"could not connect to the control plane at {host}", sent=False
            ) from error
        except (aiohttp.ClientError, TimeoutError) as error:
            raise TransportError(
                "the connection to the control plane broke before it replied", sent=True
            ) from error
        raise error_from_response(status, body, retry_after)

    def _observe(self, call: str, outcome: str) -> None:
        if self._observer is not None:
            self._observer(call, outcome)
