"""Settings given as Secret Manager references, read once at start.

A setting whose value is ``sm://PROJECT/SECRET`` or ``sm://PROJECT/SECRET#VERSION`` (the
form berglas introduced: https://github.com/GoogleCloudPlatform/berglas, doc/reference-
syntax.md; the version defaults to ``latest``) is replaced by that secret version's data,
read with Secret Manager's ``access`` method and Application Default Credentials
(https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets.versions/access).
So ``app.yaml``, a Cloud Run service or an env file carries references, never values, and
the service account needs ``secretmanager.versions.access`` on each secret.

Every reference that cannot be read is reported at once, by setting and reference, with the
reason and what to do; the data itself never appears in a message.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from bot.vertex.auth import TokenSource
from handlers.domain.errors import CredentialsError

PREFIX = "sm://"
SECRET_MANAGER_URL = "https://secretmanager.googleapis.com/"
# A secret id: letters, digits, "-" and "_", up to 255 (Secret Manager's "secretId"). A
# project id: 6 to 30 lower-case letters, digits and hyphens (or a project number).
_FORM = re.compile(
    r"^sm://(?P<project>[a-z0-9][a-z0-9-]{4,28}[a-z0-9]|\d+)/(?P<secret>[A-Za-z0-9_-]{1,255})"
    r"(?:#(?P<version>latest|[1-9]\d*))?$"
)
ATTEMPTS = 3  # for 429, 5xx and a connection that fails: the read changes nothing
TIMEOUT = 10.0
RETRYABLE = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Reference:
    project: str
    secret: str
    version: str = "latest"

    @classmethod
    def parse(cls, text: str) -> Reference:
        match = _FORM.match(text.strip())
        if match is None:
            raise ValueError(
                f"{text.strip()} is not a Secret Manager reference of the form "
                "sm://PROJECT/SECRET or sm://PROJECT/SECRET#VERSION"
            )
        return cls(match["project"], match["secret"], match["version"] or "latest")

    @property
    def resource(self) -> str:
        return f"projects/{self.project}/secrets/{self.secret}/versions/{self.version}"

    def __str__(self) -> str:
        return f"sm://{self.project}/{self.secret}#{self.version}"


def is_reference(value: str | None) -> bool:
    return value is not None and value.strip().startswith(PREFIX)


def references_in(
    environ: Mapping[str, str], names: Iterable[str]
) -> tuple[dict[str, Reference], list[str]]:
    """The references among ``names`` in ``environ``, and a problem for each malformed one."""
    found: dict[str, Reference] = {}
    problems: list[str] = []
    for name in names:
        value = environ.get(name)
        if not is_reference(value):
            continue
        assert value is not None
        try:
            found[name] = Reference.parse(value)
        except ValueError as error:
            problems.append(f"{name}: {error}")
    return found, problems


class SecretReadError(Exception):
    """A reference that could not be read; the message says why and what to do."""


async def read_references(
    references: Mapping[str, Reference], *, url: str, tokens: TokenSource
) -> tuple[dict[str, str], list[str]]:
    """Each reference's data by setting name, and a problem for each that could not be read.
    They are read concurrently, in one session."""
    names = list(references)
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        reader = SecretReader(session, url, tokens)
        results = await asyncio.gather(
            *(reader.read(references[n]) for n in names), return_exceptions=True
        )
    values: dict[str, str] = {}
    problems: list[str] = []
    for name, result in zip(names, results, strict=True):
        if isinstance(result, SecretReadError):
            problems.append(f"{name}: cannot read {references[name]}: {result}")
        elif isinstance(result, BaseException):
            raise result
        else:
            values[name] = result
    return values, problems


class SecretReader:
    def __init__(self, session: aiohttp.ClientSession, url: str, tokens: TokenSource) -> None:
        self.session = session
        self.url = url.rstrip("/") + "/"
        self.tokens = tokens

    async def read(self, reference: Reference) -> str:
        try:
            token = await self.tokens.token()
        except CredentialsError as error:
            raise SecretReadError(f"no Google Cloud credentials ({error.user_message})") from None
        for attempt in range(ATTEMPTS):
            try:
                status, body = await self._get(reference, token)
            except (aiohttp.ClientError, TimeoutError) as error:
                if attempt + 1 < ATTEMPTS:
                    await asyncio.sleep(0.5 * 2**attempt)
                    continue
                reason = type(error).__name__
                raise SecretReadError(f"Secret Manager could not be reached ({reason})") from None
            if status in RETRYABLE and attempt + 1 < ATTEMPTS:
                await asyncio.sleep(0.5 * 2**attempt)
                continue
            return payload_text(status, body, reference)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _get(self, reference: Reference, token: str) -> tuple[int, Any]:
        address = f"{self.url}v1/{reference.resource}:access"
        headers = {"Authorization": f"Bearer {token}"}
        async with self.session.get(address, headers=headers) as response:
            try:
                body = await response.json(content_type=None)
            except ValueError:
                body = None
            return response.status, body


def payload_text(status: int, body: Any, reference: Reference) -> str:
    """The secret's data as text, or ``SecretReadError`` saying why not."""
    if status != 200:
        raise SecretReadError(refusal(status, body, reference))
    payload = body.get("payload") if isinstance(body, dict) else None
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, str):
        raise SecretReadError("Secret Manager's answer has no payload.data")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise SecretReadError("Secret Manager's payload.data is not base64") from None
    checksum = payload.get("dataCrc32c") if isinstance(payload, dict) else None
    if checksum is not None and str(checksum) != str(crc32c(raw)):
        raise SecretReadError("the payload's checksum does not match its data")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretReadError("the secret's data is not UTF-8 text") from None
    # `echo value | gcloud secrets create NAME --data-file=-` stores a newline after it
    return text.removesuffix("\n").removesuffix("\r")


def refusal(status: int, body: Any, reference: Reference) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    name = error.get("status", "") if isinstance(error, dict) else ""
    message = str(error.get("message", "")) if isinstance(error, dict) else ""
    said = f"Secret Manager answered {status} {name}".rstrip() + (f": {message}" if message else "")
    hint = {
        401: "the credentials were refused",
        403: "grant roles/secretmanager.secretAccessor on the secret to the service account "
        f"clusterbot runs as: gcloud secrets add-iam-policy-binding {reference.secret} "
        f"--project {reference.project} --member serviceAccount:SA_EMAIL "
        "--role roles/secretmanager.secretAccessor",
        404: f"create it, e.g. printf %s VALUE | gcloud secrets create {reference.secret} "
        f"--project {reference.project} --data-file=-, or fix the reference",
    }.get(status)
    if name == "FAILED_PRECONDITION":
        hint = "enable the version, or refer to an enabled one"
    return said + (f" Fix: {hint}." if hint else "")


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum Secret Manager gives as payload.dataCrc32c."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF
