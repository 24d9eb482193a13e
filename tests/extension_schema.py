"""Validation of ``_agybridge/*`` payloads against docs/extensions.schema.json."""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema

from .acp_wire import REPO_DIR

SCHEMA_PATH = REPO_DIR / "docs/extensions.schema.json"


@functools.cache
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded


def check(method: str, part: str, value: Any) -> None:
    """``value`` (``params`` or ``result``) of ``method`` matches its schema."""
    _check(schema()["x-methods"][method][part], value, f"{method} {part}")


def check_def(name: str, value: Any) -> None:
    """``value`` matches the schema's ``$defs/<name>``."""
    _check(f"#/$defs/{name}", value, name)


def _check(ref: str, value: Any, label: str) -> None:
    whole = schema()
    validator = jsonschema.Draft202012Validator({**whole, "$ref": ref})
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    assert not errors, f"{label}: " + "; ".join(f"{list(e.path)}: {e.message}" for e in errors)


async def call(client: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send one extension request; both sides are schema-checked. Returns the
    whole response (``result`` or ``error``)."""
    check(method, "params", params)
    response: dict[str, Any] = await client.request(method, params)
    if "result" in response:
        check(method, "result", response["result"])
    return response


def check_notification(method: str, params: Any) -> None:
    """``params`` of the extension notification ``method`` match its schema."""
    _check(schema()["x-notifications"][method], params, f"{method} params")
