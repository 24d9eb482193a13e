"""The PreToolUse hook helper agy runs before every tool call (stdlib only).

agy runs the command from ``hooks.json`` through ``sh -c`` with the hook JSON on stdin
and reads one decision object from stdout; the exit status must be 0, or the call fails
with a hook error instead of a clean denial (hooks-and-tools.md §A4, §A5). This helper
forwards the payload to the bridge's broker over the Unix socket named in its
environment and prints the broker's answer. Every failure prints an explicit deny with a
short reason (the model reads it) and exits 0: an empty or decision-less reply is itself
version-dependent (§A4), so we never leave the choice to agy. Except for an observer
(``AGYBRIDGE_PERMISSION_OBSERVE=1``: agy runs ungated, with its own checks or none, and
the hook only lets the bridge keep the before-state of files): it fails open, printing
``allow``, which leaves the decision to agy's own checks, as without the hook (§A4, §A7).

Wire format (one line each way, UTF-8 JSON):
  helper -> broker: ``{"token": "<hex>", "payload": <agy's stdin JSON>}``
  broker -> helper: ``{"decision": "allow"}`` or ``{"decision": "deny", "reason": "…"}``

The helper never half-closes its side after the request: the broker reads EOF as "the
hook was killed" and cancels the pending question.

Start-up cost matters (one run per tool call), so this module imports only the standard
library and is run by path: ``python -I -S …/hook.py`` (isolated: no site-packages, no
``PYTHON*`` variables from agy's environment). ``python -m agybridge.permissions.hook``
works as well but imports the package (trio, attrs) first and is ~5x slower; see
smoke/bench_hook.py for the measurement.
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import time

# ``typing`` costs ~2 ms of a ~20 ms start (python -X importtime): annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Environment set on the agy child (and inherited by its hooks).
ENV_SOCKET = "AGYBRIDGE_PERMISSION_SOCKET"
ENV_TOKEN = "AGYBRIDGE_PERMISSION_TOKEN"
#: How long the helper waits for the broker's reply; must stay below the hooks.json
#: ``timeout`` so a slow answer ends in our deny, not in agy killing the hook.
ENV_TIMEOUT = "AGYBRIDGE_PERMISSION_TIMEOUT_S"
#: "1": the hook observes an ungated agy; its failures allow (never change agy's choice).
ENV_OBSERVE = "AGYBRIDGE_PERMISSION_OBSERVE"

MAX_INPUT_BYTES = 4 * 2**20  # 4 MiB: edits carry whole file bodies in their args
MAX_REPLY_BYTES = 64 * 2**10  # 64 KiB
MAX_REASON_CHARS = 500
DEFAULT_REPLY_TIMEOUT_S = 590.0  # below hooks.json's 600 s (§A5: KG uses 590 < 600)
CONNECT_TIMEOUT_S = 10.0  # connect + send the request
STDIN_TIMEOUT_S = 10.0  # agy writes the payload at once; do not wait forever for EOF
STDIN_IDLE_S = 0.5  # a complete JSON object followed by this much silence is enough
_CHUNK = 64 * 2**10
_PREFIX = "agybridge: "


class HookFailure(Exception):
    """A failure that becomes a deny with this message as its reason."""


def allow() -> dict[str, str]:
    return {"decision": "allow"}


def deny(reason: str) -> dict[str, str]:
    return {"decision": "deny", "reason": reason}


def read_stdin(fd: int, limit: int = MAX_INPUT_BYTES) -> bytes:
    """Read the hook payload: to EOF, or until a complete JSON object goes quiet.

    Raises:
      HookFailure: more than ``limit`` bytes, or no complete payload in time.
    """
    data = bytearray()
    deadline = time.monotonic() + STDIN_TIMEOUT_S
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            if _is_json_object(data):
                return bytes(data)
            raise HookFailure("timed out reading the hook input")
        ready, _, _ = select.select([fd], [], [], min(remaining, STDIN_IDLE_S))
        if not ready:
            if data and _is_json_object(data):
                return bytes(data)  # agy did not close stdin; the object is complete
            continue
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise HookFailure(f"hook input larger than {limit} bytes")


def _is_json_object(data: bytes | bytearray) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


def reply_timeout(environ: Mapping[str, str]) -> float:
    """The reply timeout from the environment, or the default when unset or invalid."""
    try:
        value = float(environ.get(ENV_TIMEOUT, ""))
    except ValueError:
        return DEFAULT_REPLY_TIMEOUT_S
    return value if 0 < value < 86400 else DEFAULT_REPLY_TIMEOUT_S


def ask_broker(payload: Any, environ: Mapping[str, str]) -> dict[str, str]:
    """Send the payload to the broker and return the decision it answered.

    Raises:
      HookFailure: no broker configured or reachable, timeout, or an unusable reply.
    """
    path = environ.get(ENV_SOCKET)
    token = environ.get(ENV_TOKEN)
    if not path or not token:
        raise HookFailure("permission broker not configured")
    request = json.dumps({"token": token, "payload": payload}, separators=(",", ":"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(path)
        except TimeoutError:
            raise HookFailure("timed out connecting to the permission broker") from None
        except OSError as exc:
            raise HookFailure(f"permission broker unreachable ({exc.strerror})") from None
        try:
            sock.sendall(request.encode() + b"\n")
        except TimeoutError:
            raise HookFailure("timed out sending to the permission broker") from None
        except OSError:
            pass  # the broker may have answered (busy) and closed: read its reply
        line = _read_line(sock, reply_timeout(environ))
    return parse_reply(line)


def _read_line(sock: socket.socket, timeout_s: float) -> bytes:
    deadline = time.monotonic() + timeout_s
    data = bytearray()
    while b"\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HookFailure("no answer from the permission broker in time")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(_CHUNK)
        except TimeoutError:
            raise HookFailure("no answer from the permission broker in time") from None
        except OSError as exc:
            raise HookFailure(f"permission broker connection failed ({exc.strerror})") from None
        if not chunk:
            if data:
                break  # an unterminated last line is still a line
            raise HookFailure("permission broker closed the connection without an answer")
        data += chunk
        if len(data) > MAX_REPLY_BYTES:
            raise HookFailure("permission broker reply too large")
    return bytes(data.split(b"\n", 1)[0])


def parse_reply(line: bytes) -> dict[str, str]:
    """The decision object to print for one broker reply line.

    Raises:
      HookFailure: the reply is not an explicit allow or deny.
    """
    try:
        reply = json.loads(line)
    except ValueError:
        raise HookFailure("malformed reply from the permission broker") from None
    if not isinstance(reply, dict):
        raise HookFailure("malformed reply from the permission broker")
    decision = reply.get("decision")
    if decision == "allow":
        return allow()
    if decision == "deny":
        reason = reply.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            reason = "denied by agybridge"
        return deny(reason.strip()[:MAX_REASON_CHARS])
    raise HookFailure("reply from the permission broker has no allow/deny decision")


def decide(stdin_fd: int, environ: Mapping[str, str]) -> dict[str, str]:
    """Read the hook input and return the decision; never raises an Exception."""
    # An observer's failure must not become a denial agy would not make.
    observer = environ.get(ENV_OBSERVE) == "1"
    try:
        raw = read_stdin(stdin_fd)
        try:
            payload = json.loads(raw)
        except ValueError:
            raise HookFailure("hook input is not JSON") from None
        if not isinstance(payload, dict):
            raise HookFailure("hook input is not a JSON object")
        return ask_broker(payload, environ)
    except HookFailure as exc:
        return allow() if observer else deny(_PREFIX + str(exc))
    except Exception as exc:
        return allow() if observer else deny(f"{_PREFIX}hook helper failed ({type(exc).__name__})")


def main() -> int:
    """Print one decision for agy and exit 0, whatever happened."""
    try:
        decision = decide(0, os.environ)
    except BaseException:  # KeyboardInterrupt and friends: still answer, still exit 0
        observer = os.environ.get(ENV_OBSERVE) == "1"
        decision = allow() if observer else deny(_PREFIX + "hook helper interrupted")
    out = (json.dumps(decision, separators=(",", ":")) + "\n").encode()
    try:  # noqa: SIM105 (contextlib is one more import on every tool call)
        os.write(1, out)
    except OSError:
        pass  # agy went away; nobody is left to read the answer
    return 0


if __name__ == "__main__":
    sys.exit(main())
