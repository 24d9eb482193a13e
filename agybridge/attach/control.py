"""``agybridge status`` and ``agybridge stop``: ask the daemon over its socket.

The daemon answers two extension methods on the same socket as ACP (ACP
reserves ``_``-prefixed names for extensions), without ``initialize``:
``_agybridge/status`` and ``_agybridge/stop`` (``{"timeoutS": n}``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import socket
import sys
from typing import Any

from .paths import lock_path, socket_path
from .start import connect, wait_lock_free
from .trust import UntrustedError

#: Answering status is quick; this only bounds a daemon that hangs.
REQUEST_TIMEOUT_S = 10.0
DEFAULT_STOP_TIMEOUT_S = 10.0
#: After the connections close, how long the daemon may take to let go of its lock
#: (closing its store and watchdog, removing its socket).
LOCK_RELEASE_S = 15.0
#: A daemon exiting as it accepted the connection (idle exit) closes it unanswered:
#: asked again this many times (then nothing listens, or a new daemon does).
ATTEMPTS = 3


class ControlError(Exception):
    """No daemon, or it answered an error."""


def call(
    path: str, method: str, params: Any = None, *, timeout_s: float = REQUEST_TIMEOUT_S
) -> tuple[socket.socket, Any]:
    """Send one request; returns the open connection and the result.

    Raises:
        ControlError: nothing listens at ``path``, the socket is not to be
            trusted (attach/trust.py), or the daemon answered an error.
    """
    for attempt in range(1, ATTEMPTS + 1):
        sock = _connect(path)
        try:
            return sock, _ask(sock, method, params, timeout_s)
        except _Unanswered:
            sock.close()
            if attempt == ATTEMPTS:
                raise ControlError("the daemon closed the connection without answering") from None
        except BaseException:
            sock.close()
            raise
    raise AssertionError("unreachable")  # pragma: no cover


class _Unanswered(Exception):
    pass


def _connect(path: str) -> socket.socket:
    try:
        return connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        raise ControlError(f"no agybridge daemon is running (nothing listens on {path})") from None
    except UntrustedError as exc:
        raise ControlError(str(exc)) from None
    except OSError as exc:
        raise ControlError(f"cannot connect to {path}: {exc}") from None


def _ask(sock: socket.socket, method: str, params: Any, timeout_s: float) -> Any:
    sock.settimeout(timeout_s)
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    try:
        sock.sendall(json.dumps(message).encode() + b"\n")
        reader = sock.makefile("rb")
        for line in reader:
            answer = json.loads(line)
            if answer.get("id") == 1:
                break
        else:
            raise _Unanswered
    except (ConnectionResetError, BrokenPipeError):
        raise _Unanswered from None
    except (OSError, ValueError) as exc:
        raise ControlError(f"the daemon did not answer {method}: {exc}") from None
    if "error" in answer:
        raise ControlError(f"the daemon answered an error: {answer['error'].get('message')}")
    return answer.get("result")


def status_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="agybridge status", description="what the daemon is doing"
    )
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    args = parser.parse_args(argv)
    try:
        sock, result = call(socket_path(), "_agybridge/status")
    except ControlError as exc:
        print(f"agybridge status: {exc}", file=sys.stderr)
        return 1
    sock.close()
    print(json.dumps(result, indent=2) if args.json else format_status(result))
    return 0


def stop_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="agybridge stop",
        description="stop the daemon: every prompt is answered (cancelled), every agy child reaped",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_STOP_TIMEOUT_S,
        help="seconds the sessions get to close before they are killed "
        f"(default {DEFAULT_STOP_TIMEOUT_S:g})",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.timeout < float("inf"):  # also NaN, which JSON cannot carry
        parser.error(f"--timeout must be a number of seconds, at least 0, not {args.timeout!r}")
    path = socket_path()
    try:
        sock, result = call(path, "_agybridge/stop", {"timeoutS": args.timeout})
    except ControlError as exc:
        print(f"agybridge stop: {exc}", file=sys.stderr)
        return 1
    # The daemon closes every connection as it exits: EOF is "stopped". The
    # kill escalation after the timeout takes a few seconds more at most.
    sock.settimeout(args.timeout + 15.0)
    try:
        while sock.recv(2**16):
            pass
    except TimeoutError:
        print(f"agybridge stop: daemon pid {result.get('pid')} is still running", file=sys.stderr)
        return 1
    except OSError:
        pass
    finally:
        sock.close()
    # The connections close before the daemon is done (its socket file, its
    # lock): "stopped" once the lock it holds for its whole life is free, so
    # that a daemon started right after does not find it running.
    if not wait_lock_free(lock_path(path), LOCK_RELEASE_S):
        print(f"agybridge stop: daemon pid {result.get('pid')} is still running", file=sys.stderr)
        return 1
    print(f"agybridge daemon (pid {result.get('pid')}) stopped")
    return 0


def format_status(status: dict[str, Any]) -> str:
    """The human table of ``agybridge status``."""
    frozen = status.get("clientsNotReading") or 0
    not_reading = f" ({frozen} not reading: detached)" if frozen else ""
    lines = [
        f"daemon pid {status['pid']}, up {_duration(status['uptimeS'])}, "
        f"RSS {status['rssBytes'] / 2**20:.1f} MiB, {status['clients']} client(s){not_reading}",
        f"socket {status['socket']}",
    ]
    sessions = status["sessions"]
    if not sessions:
        lines.append("no live sessions")
        return "\n".join(lines)
    header = (
        "SESSION",
        "STATE",
        "AGY PID",
        "MODE",
        "MODEL",
        "TOKENS",
        "LAST ACTIVITY",
        "TITLE",
        "CWD",
    )
    rows = [header]
    for s in sessions:
        rows.append(
            (
                s["sessionId"],
                _state(s),
                str(s["agyPid"] or "-"),
                s["mode"] + (" (agy: always-proceed!)" if s.get("agyPermissionOverride") else ""),
                s["model"] or "-",
                str(s["tokens"].get("totalTokens", "-")),
                _when(s["lastActivity"]),
                (s["title"] or "")[:40],
                s["cwd"],
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines.append("")
    lines += [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join(lines)


def _state(session: dict[str, Any]) -> str:
    state = str(session["state"])
    if state == "running":
        state = f"running for {_duration(session['runningForS'])}"
    if session["permissionQuestions"]:
        state = f"waiting for permission ({session['permissionQuestions']})"
    if not session["attached"]:
        state += ", detached"
    failure = session.get("lastFailure")
    if failure:  # a catalogue id (docs/errors.md)
        state += f", last turn: {failure['cause']}"
    return state


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _when(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(float(timestamp)).strftime("%H:%M:%S")
