"""``_agybridge/mcp/test``: start one of a session's MCP servers (as agy was
given it, mcp.py) and see whether it answers MCP's ``initialize``.

A stdio server is started the way agy starts it — its command and arguments,
the bridge's environment plus the server's ``env``, in the session's cwd — in
a process group of its own (`ProcessTree`), sent one ``initialize`` line, and
stopped with the whole group (SIGINT, SIGTERM, SIGKILL, then a sweep of
anything it left) once it answered, exited or the wait ran out. An HTTP server
gets one ``initialize`` POST (streamable HTTP: the answer is JSON or an event
stream). The outcome is a result either way: the test ran, the server failed.

Secrets stay out of the outcome as they stay out of the logs (mcp.py): it
names the command's base name and the URL's host, never an env value, a
header or the server's stderr (a server may print its token there).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs
import trio

from .. import __version__, causes
from ..agy.policy import EscalationPolicy
from ..agy.tree import ProcessTree

#: The catalogue's cause of every ``answered: false``.
UNANSWERED = "mcp_server_unanswered"
#: The MCP protocol revision the ``initialize`` asks for (servers answer theirs).
PROTOCOL_VERSION = "2025-06-18"
#: The longest reply line (or HTTP body) read from a server.
MAX_REPLY_BYTES = 2**20
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "agybridge-mcp-test", "version": __version__},
    },
}


@attrs.frozen
class Outcome:
    """What the server did: answered (with its info), or why not."""

    answered: bool
    #: ``not_found``, ``not_executable``, ``exited``, ``timeout``,
    #: ``bad_reply``, ``error_reply``, ``unreachable`` (None: it answered).
    kind: str | None = None
    message: str | None = None
    reply: Mapping[str, Any] = attrs.field(factory=dict)

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"answered": self.answered}
        if self.answered:
            info = self.reply.get("serverInfo")
            out["protocolVersion"] = self.reply.get("protocolVersion")
            out["serverInfo"] = (
                {"name": info.get("name"), "version": info.get("version")}
                if isinstance(info, Mapping)
                else None
            )
            capabilities = self.reply.get("capabilities")
            out["capabilities"] = sorted(capabilities) if isinstance(capabilities, Mapping) else []
        else:
            out["error"] = {"cause": UNANSWERED, "kind": self.kind, "message": self.message}
        return out


def _failed(kind: str, message: str) -> Outcome:
    return Outcome(False, kind, message)


def _judge(reply: Any, what: str) -> Outcome:
    """A JSON-RPC reply to the ``initialize`` as the outcome."""
    if not isinstance(reply, Mapping) or reply.get("id") != 1:
        return _failed("bad_reply", f"{what} answered something that is not the initialize reply")
    if "error" in reply:
        error = reply["error"]
        detail = error.get("message") if isinstance(error, Mapping) else None
        return _failed("error_reply", f"{what} refused initialize: {detail or error!r}")
    result = reply.get("result")
    if not isinstance(result, Mapping):
        return _failed("bad_reply", f"{what} answered initialize without a result object")
    return Outcome(True, reply=result)


async def probe(entry: Mapping[str, Any], *, cwd: str, timeout_s: float,
                policy: EscalationPolicy) -> Outcome:  # fmt: skip
    """Test one ``mcp_config.json`` entry (stdio ``command`` or ``serverUrl``)."""
    if "command" in entry:
        return await _probe_stdio(entry, cwd=cwd, timeout_s=timeout_s, policy=policy)
    url = str(entry.get("serverUrl") or entry.get("url"))
    headers = dict(entry.get("headers") or {})
    return await trio.to_thread.run_sync(
        _post_initialize, url, headers, timeout_s, abandon_on_cancel=True
    )


async def _probe_stdio(
    entry: Mapping[str, Any], *, cwd: str, timeout_s: float, policy: EscalationPolicy
) -> Outcome:
    command = str(entry["command"])
    what = f"the MCP server command {os.path.basename(command)!r}"
    tree = ProcessTree(f"mcp test {os.path.basename(command)}", policy)
    env = {**os.environ, **dict(entry.get("env") or {})}
    try:
        proc = await tree.open_process(
            [command, *entry.get("args", [])],
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return _failed("not_found", f"{what} was not found (a path, or a name on PATH)")
    except PermissionError:
        return _failed("not_executable", f"{what} cannot be run: it is not executable")
    except OSError as exc:
        return _failed("not_executable", f"{what} cannot be run: {exc.strerror or exc}")
    assert proc.stdin is not None and proc.stdout is not None
    try:
        with trio.move_on_after(timeout_s):
            return await _exchange(proc, what)
        return _failed("timeout", f"{what} did not answer initialize within {timeout_s:g} s")
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                await tree.escalate(proc)
            await tree.sweep()


async def _exchange(proc: trio.Process, what: str) -> Outcome:
    """Send ``initialize``; the first reply line (notifications and log lines
    before it are skipped)."""
    assert proc.stdin is not None and proc.stdout is not None
    # One that exited at once is told below, with its exit status.
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await proc.stdin.send_all(json.dumps(INITIALIZE).encode() + b"\n")
    pending = b""
    while True:
        chunk = await proc.stdout.receive_some(65536)
        if not chunk:
            status = causes.exit_description(await proc.wait())
            return _failed("exited", f"{what} ended ({status}) without answering initialize")
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a stray print: stdio servers must not, some do
            if isinstance(message, Mapping) and "id" in message:
                return _judge(message, what)
        if len(pending) > MAX_REPLY_BYTES:
            return _failed("bad_reply", f"{what} printed a line over {MAX_REPLY_BYTES} bytes")


def _post_initialize(url: str, headers: Mapping[str, str], timeout_s: float) -> Outcome:
    """Streamable HTTP: one POST; the reply is JSON or an event stream (blocking)."""
    # Loaded by the first HTTP test, not with the session methods (issue 15).
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    what = f"the MCP server at {urlsplit(url).hostname!r}"
    request = urllib.request.Request(
        url,
        data=json.dumps(INITIALIZE).encode(),
        method="POST",
        headers={
            **headers,
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    deadline = time.monotonic() + timeout_s
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            kind = response.headers.get_content_type()
            if kind != "text/event-stream":
                return _judge(json.loads(response.read(MAX_REPLY_BYTES)), what)
            read = 0
            while time.monotonic() < deadline and read < MAX_REPLY_BYTES:
                line = response.readline(MAX_REPLY_BYTES)
                if not line:
                    break
                read += len(line)
                if line.startswith(b"data:"):
                    return _judge(json.loads(line[5:]), what)
            return _failed("bad_reply", f"{what} sent an event stream without the reply")
    except urllib.error.HTTPError as exc:
        return _failed("error_reply", f"{what} answered HTTP {exc.code} {exc.reason}")
    except (TimeoutError, urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        if isinstance(reason, TimeoutError) or isinstance(exc, TimeoutError):
            return _failed("timeout", f"{what} did not answer initialize within {timeout_s:g} s")
        return _failed("unreachable", f"{what} cannot be reached: {reason}")
    except ValueError:
        return _failed("bad_reply", f"{what} answered something that is not JSON")
