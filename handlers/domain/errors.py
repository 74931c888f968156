"""Errors from the control plane, one type per google.rpc code, each safe to show a user.

The AIP-193 body ``{"error": {"code", "message", "status", "details"}}`` is parsed into the
matching subclass. ``user_message`` never carries a raw body or anything shaped like a
credential: server messages are trimmed and scrubbed before they are kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from handlers.errors import Blame, UserError

# google.rpc.Code: numeric code -> canonical name, and the HTTP status each maps to.
RPC_CODES: dict[int, str] = {
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}
RPC_NUMBERS: dict[str, int] = {name: number for number, name in RPC_CODES.items()}
HTTP_FROM_STATUS: dict[str, int] = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "INTERNAL": 500,
    "UNKNOWN": 500,
    "DATA_LOSS": 500,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}
STATUS_FROM_HTTP: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_SECRET_PATTERNS = [
    re.compile(r"ya29\.[0-9A-Za-z_\-.]+"),  # OAuth2 access tokens
    re.compile(r"(?i)bearer\s+[0-9A-Za-z_\-.=]+"),
    re.compile(r"xox[abposr]-[0-9A-Za-z\-]+"),  # Slack tokens, should one ever be echoed
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"),
    re.compile(
        r"(?i)(access_token|refresh_token|client_secret|private_key)\"?\s*[:=]\s*\"?[^\s\",}]+"
    ),
]
# Every pattern above needs one of these (lowercased) in the text: most text has none, and
# is let through without running a regular expression.
_MARKERS = (
    "ya29.",
    "bearer",
    "xox",
    "private key",
    "access_token",
    "refresh_token",
    "client_secret",
    "private_key",
)
MAX_MESSAGE = 300
MAX_DETAILS = 10  # a status's details kept: enough for every kind Google documents


def has_markers(text: str) -> bool:
    """Whether ``text`` might hold something credential-shaped."""
    lowered = text.lower()
    return any(marker in lowered for marker in _MARKERS)


def redact_patterns(text: str) -> str:
    """Replace credential-shaped substrings, keeping the text's layout."""
    if not has_markers(text):
        return text
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub("[redacted]", text)
    return text


def scrub(text: str, limit: int = MAX_MESSAGE) -> str:
    """Remove credential-shaped substrings and trim, so that the text can be shown or stored."""
    text = " ".join(redact_patterns(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class VertexError(UserError):
    """A failed control-plane call. ``str()`` is the user-safe message."""

    blame = Blame.UPSTREAM

    status: ClassVar[str] = "UNKNOWN"
    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        http_status: int | None = None,
        reason: str | None = None,
        retry_after: float | None = None,
        details: Sequence[Any] = (),
    ) -> None:
        self.message = scrub(message) or self.status.replace("_", " ").lower()
        self.http_status = http_status if http_status is not None else HTTP_FROM_STATUS[self.status]
        self.reason = reason
        # google.rpc.Status details (ErrorInfo, QuotaFailure...): read by what knows them
        self.details = tuple(d for d in details[:MAX_DETAILS] if isinstance(d, dict))
        self.retry_after = retry_after
        super().__init__(self.user_message)

    @property
    def code(self) -> int:
        return RPC_NUMBERS[self.status]

    @property
    def user_message(self) -> str:
        return f"{self.message} ({self.status})"

    @property
    def said(self) -> str:
        return self.user_message


class CancelledError(VertexError):
    status = "CANCELLED"


class UnknownError(VertexError):
    status = "UNKNOWN"


class InvalidArgumentError(VertexError):
    status = "INVALID_ARGUMENT"


class DeadlineExceededError(VertexError):
    status = "DEADLINE_EXCEEDED"
    retryable = True


class NotFoundError(VertexError):
    status = "NOT_FOUND"


class AlreadyExistsError(VertexError):
    status = "ALREADY_EXISTS"


class PermissionDeniedError(VertexError):
    status = "PERMISSION_DENIED"


class ResourceExhaustedError(VertexError):
    status = "RESOURCE_EXHAUSTED"
    retryable = True


class FailedPreconditionError(VertexError):
    status = "FAILED_PRECONDITION"


class AbortedError(VertexError):
    status = "ABORTED"


class OutOfRangeError(VertexError):
    status = "OUT_OF_RANGE"


class UnimplementedError(VertexError):
    status = "UNIMPLEMENTED"


class InternalError(VertexError):
    status = "INTERNAL"
    retryable = True


class UnavailableError(VertexError):
    status = "UNAVAILABLE"
    retryable = True


class DataLossError(VertexError):
    status = "DATA_LOSS"


class UnauthenticatedError(VertexError):
    status = "UNAUTHENTICATED"


class TransportError(UnavailableError):
    """The control plane could not be reached, or the connection broke before a reply."""

    def __init__(self, message: str, *, sent: bool) -> None:
        # ``sent`` is False only when the request certainly never left this process.
        self.sent = sent
        super().__init__(message, http_status=503)


class OutcomeUnknownError(VertexError):
    """A change may have reached the server, its reply was lost, and looking the cluster up
    could not tell whether it applied. It is not replayed."""

    status = "UNKNOWN"

    def __init__(self, message: str, *, cause: VertexError, later: bool = True) -> None:
        self.cause = cause
        # whether a look a little later may settle it: no look could be made, or the look was
        # refused only for now (unavailable, rate limited); not when it was refused outright
        self.later = later
        super().__init__(message, http_status=cause.http_status)


class AppliedWithoutReplyError(VertexError):
    """A change's reply was lost, but the cluster shows it applied or in progress: there is
    no operation to follow, so the caller follows the cluster itself."""

    status = "UNKNOWN"

    def __init__(self, message: str, *, cause: VertexError) -> None:
        self.cause = cause
        super().__init__(message, http_status=cause.http_status)


class MalformedReplyError(UnknownError):
    """The control plane sent something clusterbot cannot read; the message names the field."""


class CredentialsError(UnauthenticatedError):
    """clusterbot has no usable Google Cloud credentials (no ADC, an unreadable key file, a
    refresh that failed); the message says which and how to fix it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, http_status=401)

    @property
    def user_message(self) -> str:
        return f"clusterbot cannot authenticate to Google Cloud: {self.message}"


ERROR_TYPES: dict[str, type[VertexError]] = {
    cls.status: cls
    for cls in (
        CancelledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}


def _parse_retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP-date: rare from Google front ends; backoff applies instead
    return max(0.0, seconds)


def error_from_response(
    http_status: int, body: bytes, retry_after_header: str | None = None
) -> VertexError:
    """Build the typed error for an HTTP error reply, from its AIP-193 body when it has one."""
    status_name = STATUS_FROM_HTTP.get(http_status, "INTERNAL" if http_status >= 500 else "UNKNOWN")
    message = f"the control plane answered HTTP {http_status}"
    reason: str | None = None
    details: list[Any] = []
    try:
        payload: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        if isinstance(error.get("status"), str) and error["status"] in ERROR_TYPES:
            status_name = error["status"]
        elif isinstance(error.get("code"), int) and error["code"] in RPC_CODES:
            # Some front ends put the rpc code, not the HTTP status, in "code".
            status_name = RPC_CODES[error["code"]] if error["code"] < 100 else status_name
        if isinstance(error.get("message"), str) and error["message"].strip():
            message = error["message"]
        given = error.get("details")
        details = given if isinstance(given, list) else []
        reason = _reason(details)
    cls = ERROR_TYPES[status_name]
    return cls(
        message,
        http_status=http_status,
        reason=reason,
        retry_after=_parse_retry_after(retry_after_header),
        details=details,
    )


def _reason(details: Sequence[Any]) -> str | None:
    """The ErrorInfo's ``reason`` among a status's details."""
    for detail in details:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("ErrorInfo"):
            return detail.get("reason") if isinstance(detail.get("reason"), str) else None
    return None


def error_from_status(code: int, message: str, details: Sequence[Any] | None = None) -> VertexError:
    """The typed error for a google.rpc.Status, e.g. a finished operation's ``error``."""
    cls = ERROR_TYPES.get(RPC_CODES.get(code, "UNKNOWN"), UnknownError)
    return cls(message, reason=_reason(details or ()), details=details or ())


class SlurmRefusedError(UserError):
    """slurmrestd answered a change with a refusal; ``reason`` is its own words."""

    blame = Blame.UPSTREAM

    def __init__(self, reason: str, status: int) -> None:
        super().__init__(reason)
        self.reason = scrub(reason)
        self.status = status

    @property
    def said(self) -> str:
        return f"slurmrestd refused it: {self.reason}"


class SlurmUnreadableError(UserError):
    """Slurm's activity could not be read; ``reason`` says why, in words for a person."""

    blame = Blame.UPSTREAM

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = scrub(reason)

    @property
    def said(self) -> str:
        return self.reason
