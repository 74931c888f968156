"""slurmrestd's node update, ``POST /slurm/vX/node/{node_name}``, relayed by
``:callSlurmRestApi`` (the proxy's ``body`` is the request's JSON).

From SchedMD's own files (SchedMD/slurm at 284c3b95f0):

- testsuite/python/data/openapi_specs/openapi_spec_v42.json: the body is
  ``v0.0.42_update_node_msg`` (comment, cpu_bind, extra, features, features_act, gres,
  address, hostname, name, state, reason, reason_uid, resume_after, weight); ``state`` is a
  list of ``v0.0.42_node_states``; the answer is ``v0.0.42_openapi_resp`` (meta, errors,
  warnings).
- src/slurmrestd/plugins/openapi/slurmctld/nodes.c ``_update_node``: a failure is
  ``resp_error(errno, "_update_node", "Failure to update node NAME")``.
- src/common/http.c ``http_status_from_error``: a slurmctld error (2000 to 2185) is HTTP
  422; any other is 500.
- slurm/slurm_errno.h and src/common/slurm_errno.c: ESLURM_INVALID_NODE_NAME (2018, "Invalid
  node name specified"), ESLURM_INVALID_NODE_STATE_TRANSITION (2180, "Invalid node state
  transition"), ESLURM_DATA_FLAGS_INVALID (9207, "Data parser unable to parse invalid flag").
- src/slurmctld/node_mgr.c ``update_node``: a non-empty ``reason`` replaces the node's, with
  the time and the caller; ``_valid_node_state_change``: DOWN, DRAIN, FAIL and
  NOT_RESPONDING are always valid; RESUME only for a node DOWN, FUTURE, or flagged DRAIN,
  FAIL or REBOOT_REQUESTED; UNDRAIN unless INVALID_REG. RESUME returns a node to service
  (its DOWN, DRAIN and FAIL cleared, and its reason).
"""

from __future__ import annotations

import re
from typing import Any

from bot.sandbox.controlplane import pretty

NODE = re.compile(r"^node/([^/]+)/?$")
# v0.0.42_node_states (openapi_spec_v42.json)
NODE_STATE_ENUM = frozenset(
    {
        *("INVALID", "UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"),
        *("RESERVED", "UNDRAIN", "CLOUD", "RESUME", "DRAIN", "COMPLETING", "NOT_RESPONDING"),
        *("POWERED_DOWN", "FAIL", "POWERING_UP", "MAINTENANCE", "REBOOT_REQUESTED"),
        *("REBOOT_CANCELED", "POWERING_DOWN", "DYNAMIC_FUTURE", "REBOOT_ISSUED", "PLANNED"),
        *("INVALID_REG", "POWER_DOWN", "POWER_UP", "POWER_DRAIN", "DYNAMIC_NORM"),
    }
)
OUT_OF_SERVICE = ("DOWN", "DRAIN", "FAIL")
INVALID_NODE_NAME = (2018, "Invalid node name specified")
INVALID_TRANSITION = (2180, "Invalid node state transition")
INVALID_FLAG = (9207, "Data parser unable to parse invalid flag")


def _error(meta: dict[str, Any], node: str, code: tuple[int, str], status: int) -> dict[str, Any]:
    number, words = code
    failure = {
        "description": f"Failure to update node {node}",
        "error_number": number,
        "error": words,
        "source": "_update_node",
    }
    return {
        "status": status,
        "body": pretty.dumps({"meta": meta, "errors": [failure], "warnings": []}),
    }


def update_node(
    meta: dict[str, Any],
    node: str,
    now: tuple[list[str], str] | None,
    message: dict[str, Any],
    caller: str,
    at: int,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The reply to the update, and the node's new override (its state, reason and who set
    it), or None when nothing changed; ``now`` is the node's state and reason, None for a
    node the cluster does not have."""
    if now is None:
        return _error(meta, node, INVALID_NODE_NAME, 422), None
    wanted = message.get("state", [])
    if not isinstance(wanted, list) or not all(isinstance(s, str) for s in wanted):
        return _error(meta, node, INVALID_FLAG, 500), None
    if set(wanted) - NODE_STATE_ENUM:
        return _error(meta, node, INVALID_FLAG, 500), None
    state, reason = list(now[0]), now[1]
    by = ""
    given = str(message.get("reason") or "")
    if given:
        reason, by = given, caller
    if "RESUME" in wanted:
        if not (
            {"DOWN", "FUTURE"} & set(state) or {"DRAIN", "FAIL", "REBOOT_REQUESTED"} & set(state)
        ):
            return _error(meta, node, INVALID_TRANSITION, 422), None
        state = [s for s in state if s not in OUT_OF_SERVICE] or ["IDLE"]
        if state == ["NOT_RESPONDING"]:
            state = ["IDLE"]
        reason, by = "", ""
    if "UNDRAIN" in wanted:
        if "INVALID_REG" in state:
            return _error(meta, node, INVALID_TRANSITION, 422), None
        state = [s for s in state if s != "DRAIN"] or ["IDLE"]
    if "DOWN" in wanted:
        state = ["DOWN", *(s for s in state if s not in ("IDLE", "ALLOCATED", "MIXED", "DOWN"))]
    for flag in ("DRAIN", "FAIL"):
        if flag in wanted and flag not in state:
            state.append(flag)
    body = {"meta": meta, "errors": [], "warnings": []}
    changed = {"state": state, "reason": reason, "by": by, "at": at if reason else 0}
    return {"status": 200, "body": pretty.dumps(body)}, changed
