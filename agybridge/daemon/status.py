"""``_agybridge/status``: what the daemon is doing, as JSON-ready data
(``agybridge status`` prints it as a table or as it is)."""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..session import Session

if TYPE_CHECKING:
    from ..config import Settings
    from ..host import Connection, Host
    from .readers import ReadWatch


class Daemon(Protocol):
    """What ``status`` reads of the daemon (``supervisor.py``'s ``Daemon``)."""

    settings: Settings
    host: Host
    read_watch: ReadWatch
    socket_path: Path
    started_at: float

    @property
    def connections(self) -> Mapping[int, Connection]: ...


def status_of(daemon: Daemon) -> dict[str, Any]:
    # Editors only: not this status request's own connection, nor one gone.
    clients = [c for c in daemon.connections.values() if c.acp_client and not c.gone()]
    return {
        "pid": os.getpid(),
        "uptimeS": round(trio.current_time() - daemon.started_at, 1),
        "rssBytes": rss_bytes(),
        "socket": str(daemon.socket_path),
        "clients": len(clients),
        "clientsNotReading": sum(
            daemon.read_watch.not_reading_since(c) is not None for c in clients
        ),
        "onDisconnect": daemon.settings.on_disconnect,
        "sessions": [
            _session_status(session, daemon.host.questions.get(session.session_id, 0))
            for session in daemon.host.manager.live()
        ],
    }


def _session_status(session: Session, questions: int) -> dict[str, Any]:
    outlet = session.outlet
    started = outlet.turn_started_at
    child = session.slot.current
    if questions:
        state = "waiting_for_permission"
    elif session.busy:
        state = "running"
    else:
        state = "idle"
    return {
        "sessionId": session.session_id,
        "title": session.title,
        "cwd": session.cwd,
        "mode": session.settings.mode,
        "agyPermissionMode": session.init_info.permission_mode if session.init_info else None,
        "agyPermissionOverride": session.gates.mode_overridden,
        "model": session.model,
        "state": state,
        "runningForS": round(time.time() - started, 1) if started is not None else 0.0,
        "attached": outlet.attached,
        "permissionQuestions": questions,
        "agyPid": child.pid if child is not None else None,
        "lastActivity": outlet.last_activity,
        # The catalogue id of the last turn that did not end well (docs/errors.md).
        "lastFailure": outlet.last_failure,
        "tokens": dict(session.book.usage_totals),
    }


def rss_bytes() -> int:
    """The daemon's resident memory now (Linux), else its peak."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
