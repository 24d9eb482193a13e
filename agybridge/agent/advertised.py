"""The bridge's own ACP surface as ``initialize`` advertises it: the
``_agybridge/*`` extension methods and their versions.

ACP reserves names starting with ``_`` for extensions (extensibility.mdx). The
list is the route table's rows that carry a version (routes.py): what is
advertised is what is routed, and the table loads no session machinery
(issue 15).
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..acp.notifications import NOTIFICATIONS
from .routes import ROUTES

#: Version of the extension surface as a whole (bumped on incompatible change).
EXTENSIONS_VERSION = 1

#: method -> version, in the order ``initialize`` lists them.
EXTENSION_METHODS: dict[str, int] = {
    r.method: r.version for r in ROUTES.values() if r.version is not None
}


def wants_notifications(meta: Any) -> bool:
    """The ``initialize`` request's ``_meta`` asks for the extension
    notifications: ``{"agybridge": {"notifications": true}}`` (anything else
    asks for nothing: a client is not refused over its own ``_meta``)."""
    mine = meta.get("agybridge") if isinstance(meta, dict) else None
    return isinstance(mine, dict) and mine.get("notifications") is True


def extension_capabilities(*, notifications: bool = False) -> dict[str, Any]:
    """``agentCapabilities._meta.agybridge``; ``notifications``: the client
    asked for them, so they are listed (else the list is empty, as it was
    before there were any: the answer to a client that did not ask is unchanged)."""
    return {
        "version": EXTENSIONS_VERSION,
        "bridgeVersion": __version__,
        "extensions": {name: {"version": v} for name, v in EXTENSION_METHODS.items()},
        "notifications": list(NOTIFICATIONS) if notifications else [],
    }
