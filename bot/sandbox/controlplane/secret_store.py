"""The simulated Secret Manager's state: secrets, their versions, and who may read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.sandbox.controlplane.rpc import invalid


def _table() -> list[int]:
    rows = []
    for index in range(256):
        value = index
        for _ in range(8):
            value = (value >> 1) ^ 0x82F63B78 if value & 1 else value >> 1
        rows.append(value)
    return rows


TABLE = _table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), table-driven: the simulator's own, apart from the client's."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


@dataclass
class Secret:
    versions: list[bytes] = field(default_factory=list)
    disabled: set[int] = field(default_factory=set)  # version numbers, from 1
    readable: bool = True  # False: the caller lacks secretmanager.versions.access


@dataclass
class SecretStore:
    """Secrets by (project id, secret id)."""

    secrets: dict[tuple[str, str], Secret] = field(default_factory=dict)

    def change(self, body: dict[str, Any]) -> dict[str, Any]:
        """``{"project", "secret", "value"?, "disable"?: N, "readable"?: bool}``."""
        project, name = str(body.get("project") or ""), str(body.get("secret") or "")
        if not project or not name:
            raise invalid("project and secret are required")
        secret = self.secrets.setdefault((project, name), Secret())
        if "value" in body:
            secret.versions.append(str(body["value"]).encode())
        if "disable" in body:
            secret.disabled.add(int(body["disable"]))
        if "readable" in body:
            secret.readable = bool(body["readable"])
        return {"project": project, "secret": name, "versions": len(secret.versions)}
