"""The simulator's errors: google.rpc status names, their HTTP statuses and the AIP-193 body."""

from __future__ import annotations

from typing import Any

# The simulator's own table of google.rpc status -> HTTP status (AIP-193), kept apart from
# the client's so that a wrong mapping on one side is caught by the other.
HTTP_STATUS = {
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
# The statuses a reply can carry after the change was made: the server failed or throttled
# while answering. Every other error is a deliberate refusal of a change never made.
LOST_REPLY_STATUSES = frozenset({429, 500, 501, 502, 503, 504})
STATUS_OF_HTTP = {
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


class SimError(Exception):
    """An API error the simulator answers with, in AIP-193 shape."""

    def __init__(
        self,
        status: str,
        message: str,
        *,
        reason: str | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        self.details = details  # as a fault gives them (a QuotaFailure, an ErrorInfo)

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.status]

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {
            "code": self.http_status,
            "message": self.message,
            "status": self.status,
        }
        if self.details is not None:
            error["details"] = self.details
        elif self.reason:
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": self.reason,
                    "domain": "aiplatform.googleapis.com",
                    "metadata": {},
                }
            ]
        return {"error": error}


def invalid(message: str) -> SimError:
    return SimError("INVALID_ARGUMENT", message)
