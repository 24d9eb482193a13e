"""The bridge's own ACP surface as ``initialize`` advertises it: the
``_agybridge/*`` extension methods and their versions.

ACP reserves names starting with ``_`` for extensions (extensibility.mdx). The
table lives apart from the methods (extensions.py) so that ``initialize`` is
answered without loading the session machinery (issue 15); the agent routes
exactly these names, and a test checks that `Extensions` serves each of them
(but STEER, which the agent runs like ``session/prompt``).
"""

from __future__ import annotations

from typing import Any

from .. import __version__

#: Version of the extension surface as a whole (bumped on incompatible change).
EXTENSIONS_VERSION = 1

#: Served by the agent itself (it runs a turn like ``session/prompt``).
STEER = "_agybridge/session/steer"
#: Prompts sent after it wait for it (its note reaches agy first).
ROLLBACK = "_agybridge/session/rollback"

#: method -> version, in the order ``initialize`` lists them.
EXTENSION_METHODS: dict[str, int] = {
    "_agybridge/session/runtime": 1,
    "_agybridge/session/history": 1,
    "_agybridge/session/mutations": 1,
    "_agybridge/session/diff": 1,
    ROLLBACK: 1,
    "_agybridge/mcp/list": 1,
    "_agybridge/skills/list": 1,
    STEER: 1,
}


def extension_capabilities() -> dict[str, Any]:
    """``agentCapabilities._meta.agybridge``."""
    return {
        "version": EXTENSIONS_VERSION,
        "bridgeVersion": __version__,
        "extensions": {name: {"version": v} for name, v in EXTENSION_METHODS.items()},
        # The bridge sends no extension notifications (yet).
        "notifications": [],
    }
