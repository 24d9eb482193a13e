"""The published JSON Schemas of the matrix file and the JSON report (``schema/``).

``docs/smoke-matrix.schema.json`` and ``docs/smoke-report.schema.json`` are links to
these files. The matrix schema is also the runner's one list of the closed sets the
bridge accepts (modes, efforts, stop reasons, permission answers): the reader checks
axis values against it at load time, and a test checks it against the bridge's own.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any


@functools.cache
def load(name: str) -> dict[str, Any]:
    """``schema/<name>.schema.json`` (``matrix`` or ``report``)."""
    text = resources.files(__package__).joinpath(f"schema/{name}.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def closed_set(name: str) -> tuple[str, ...] | None:
    """The values the matrix schema allows for ``name`` (an axis or key), if it is closed."""
    found = load("matrix")["$defs"].get(name)
    if not isinstance(found, dict) or "enum" not in found:
        return None
    return tuple(found["enum"])
