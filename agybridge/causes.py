"""The catalogue of causes: every failure a user can hit, one row each (pure).

A row says how the failure reaches an ACP client (a JSON-RPC error code when it
fails a request, or the stop reason a turn ends with plus a notice), a one-line
message that names the thing and the fix, and whether waiting and retrying can
help. The wire, ``agybridge doctor``, the daemon's status, the log and the smoke
runner all name failures by these ids; ``docs/errors.md`` is this table for
people (tests/unit/test_causes.py keeps the two equal).

Every error response and every failed-turn notice carries
``_meta.agybridge.cause`` (:func:`meta`) with the row's id and its structured
fields: exit code, signal by name, reset time, path, model.

The agy failure classifier (:func:`classify_agy_failure`) lives here too, so a
5xx is ``unavailable`` wherever it happens and a quota is a quota whether agy
printed ``AGY_ERROR`` or only words.
"""

from __future__ import annotations

import enum
import re
import signal
from collections.abc import Mapping
from typing import Any

import attrs

from .jsonrpc import ErrorCode


class BridgeCode(enum.IntEnum):
    """agybridge's own JSON-RPC codes, from JSON-RPC's implementation-defined
    server-error range (-32000..-32099; ACP uses -32000 and -32002): a failure
    that is neither the client's nor a bug in the bridge."""

    #: The agy program cannot be used (wrong AGY_BIN, broken or too old install).
    AGY_UNUSABLE = -32040
    #: Something the bridge needs on this machine is unusable (its staging directory).
    SETUP_UNUSABLE = -32041
    #: agy ran and failed the request (crashed, stalled, printed garbage).
    AGY_FAILED = -32042
    #: agy's service cannot serve now (quota, rate limit, 5xx): retry later.
    AGY_BUSY = -32043


#: Stop reasons a turn that did not end well may carry (ACP ``StopReason``).
END_TURN = "end_turn"
CANCELLED = "cancelled"


@attrs.frozen
class Cause:
    """One row of the catalogue."""

    id: str
    #: What happened (docs: "when").
    when: str
    #: The one-line message template (``str.format`` with the row's fields).
    message: str
    #: What to do about it (docs: "what to do").
    fix: str
    #: Waiting and retrying the same request can help.
    transient: bool
    #: The JSON-RPC code of the error that fails a request, if it can.
    code: int | None = None
    #: The stop reason of a turn it ends (with a notice), if it can.
    stop: str | None = None
    #: Where else it is reported (a notice, a tool call, ``agybridge doctor``).
    elsewhere: str | None = None

    def render(self, **fields: Any) -> str:
        """The message with its fields (a missing field shows as ``?``)."""
        return self.message.format_map(_Fields(fields))

    def with_fix(self, text: str) -> str:
        """``text`` followed by what to do, as its own sentence."""
        text = text.rstrip()
        stop = "" if text.endswith((".", "!", "?")) else "."
        return f"{text}{stop} {self.fix[0].upper()}{self.fix[1:]}."


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


_AGY_FIX_DOCTOR = "`agybridge doctor` checks it"
_DOCTOR_ONLY = "`agybridge doctor` (the bridge does not refuse to run for it)"

_ROWS = (
    # --- the agy program ------------------------------------------------------------
    Cause("agy_not_found", "AGY_BIN is unset and agy is not on PATH, or AGY_BIN names nothing",
          "{agy_bin} does not exist: set AGY_BIN to the agy program",
          "install agy or set AGY_BIN=/path/to/agy (an editor started from the desktop may "
          "have a shorter PATH than your terminal)", False, ErrorCode.RESOURCE_NOT_FOUND),
    Cause("agy_is_directory", "AGY_BIN names a directory",
          "AGY_BIN={agy_bin} is a directory, not the agy program",
          "set AGY_BIN to the agy program itself", False, BridgeCode.AGY_UNUSABLE),
    Cause("agy_not_executable", "AGY_BIN names a file that is not executable",
          "AGY_BIN={agy_bin} is not executable", "`chmod +x` it, or point AGY_BIN at agy",
          False, BridgeCode.AGY_UNUSABLE),
    Cause("agy_fails", "`agy --version` fails: agy is installed but does not run",
          "agy ({agy_bin}) does not run: {detail}",
          f"repair the agy installation or set AGY_BIN to a working agy ({_AGY_FIX_DOCTOR})",
          False, BridgeCode.AGY_UNUSABLE),
    Cause("agy_too_old", "agy is older than the oldest version the bridge supports",
          "agy {version} is older than {minimum}", "update agy: `agy update`",
          False, elsewhere=_DOCTOR_ONLY),
    Cause("not_signed_in", "agy is not signed in (or its sign-in expired)",
          "agy is not signed in",
          "sign in with your editor's login action, or run `agybridge login` (or `agy`) in a "
          "terminal, then retry", False, ErrorCode.AUTH_REQUIRED),
    # --- agy while it runs -------------------------------------------------------------
    Cause("agy_start_timeout", "agy printed no stream-json within the start-up limit",
          "agy did not start within {seconds} s",
          "run `agybridge doctor`; AGYBRIDGE_STARTUP_TIMEOUT_S sets the limit",
          True, BridgeCode.AGY_FAILED),
    Cause("stall_timeout", "agy printed nothing during a turn for longer than the stall limit",
          "agy printed nothing for {seconds} s, so the turn was stopped",
          "retry; AGYBRIDGE_STALL_TIMEOUT_S sets the limit (0: no limit)",
          False, BridgeCode.AGY_FAILED),
    Cause("print_timeout", "agy's own print timeout cut the answer short",
          "agy's print timeout cut this turn short; the answer may be incomplete",
          "update agy (1.2.6+ honours --print-timeout 0) or remove the print timeout from "
          "agy's settings", False, stop=END_TURN),
    Cause("interrupted", "agy ended the turn interrupted though the client did not cancel it",
          "agy was interrupted from outside the bridge and ended this turn early; the answer "
          "may be incomplete", "retry the prompt; if it repeats, `agybridge logs` shows what "
          "stopped agy", True, stop=END_TURN),
    Cause("agy_crashed", "agy exited (or was killed by a signal) before finishing",
          "agy exited unexpectedly ({exit}) before finishing the turn",
          "retry; if it repeats, run the same prompt with `agy -p` in a terminal and report "
          "agy's error", False, BridgeCode.AGY_FAILED),
    Cause("agy_garbage", "agy printed output that is not stream-json",
          "agy printed output that is not stream-json: {quote}",
          "run `agybridge doctor`: AGY_BIN may not be agy, or agy is too old",
          False, BridgeCode.AGY_FAILED),
    # --- agy's service ---------------------------------------------------------------
    Cause("quota", "agy's quota is used up until a reset time",
          "agy's quota is used up (resets {resets_at})",
          "wait for the reset, or switch to another model", True,
          BridgeCode.AGY_BUSY, END_TURN),
    Cause("rate_limited", "agy's service asked to slow down (429)",
          "agy was rate limited: {detail}", "wait a moment and retry", True,
          BridgeCode.AGY_BUSY, END_TURN),
    Cause("unavailable", "agy's service answered 5xx / UNAVAILABLE (at start-up or mid-turn)",
          "agy's service is unavailable: {detail}", "retry in a minute", True,
          BridgeCode.AGY_BUSY, END_TURN),
    Cause("agy_error", "agy ended the turn with an error not listed above",
          "agy error: {detail}",
          "if retrying does not help, run the prompt with `agy -p` in a terminal to see "
          "agy's whole error",
          False, BridgeCode.AGY_FAILED, END_TURN),
    # --- settings ------------------------------------------------------------------------
    Cause("invalid_model", "agy does not know the model asked for",
          "agy does not know the model {model}", "pick one of the available models",
          False, ErrorCode.INVALID_PARAMS),
    Cause("invalid_setting", "a mode, effort or other setting agy or the bridge refuses",
          "{setting} {value!r} is not accepted", "pick one of the values offered",
          False, ErrorCode.INVALID_PARAMS),
    # --- permissions ---------------------------------------------------------------------
    Cause("policy_blocked", "agy's own policy auto-denied an action (headless agy cannot ask)",
          "agy auto-denied an action that needs the {permission} permission",
          "add an allow rule under `permissions.allow` in agy's settings, or use an "
          "autonomous mode", False, stop=END_TURN),
    Cause("hook_denied", "the permission gate denied a tool call (the user or a rule said no)",
          "the bridge's permission gate denied {tool}", "allow it when asked, or change the "
          "session's mode", False,
          elsewhere="the tool call ends `failed` with the reason, its `_meta.agybridge.cause` "
          "naming it; the turn goes on"),
    Cause("gate_unavailable", "agy does not load the bridge's permission hook",
          "the permission gate is not available ({detail}), so this session runs in safe mode",
          "update agy (hooks need 1.1.18+) and make sure ~/.gemini/config/hooks.json is "
          "valid JSON", False,
          elsewhere="a notice in the first reply (the session runs in safe mode); doctor"),
    Cause("question_unanswered", "agy asked the user a question (its ask_question tool) and "
          "no answer came: the user left it unanswered or cancelled it, or the 9½-minute "
          "permission deadline passed first",
          "agy's question was not answered: {question}",
          "answer it when the editor asks; agy is told the user did not answer", False,
          elsewhere="the question's card, with `(no answer)` (failed when the deadline "
          "passed); agy goes on without the answer"),
    Cause("question_failed", "the editor could not be asked agy's question: it answered the "
          "elicitation or permission request with an error, or went away",
          "agy's question could not be asked in the editor: {detail}",
          "check that the editor is still connected and see its log; agy is told the user "
          "did not answer", True,
          elsewhere="the question's card, with `(no answer)`; agy goes on without the answer"),
    Cause("image_other_conversation", "agy named an image in another agy conversation's folder "
          "(only this session's own conversation folder is read)",
          "Image {path} not shown: it is in another agy conversation's folder",
          "ask agy to save the image in the workspace", False,
          elsewhere="the tool card's text and `_meta.agybridge.cause`; the turn goes on"),
    # --- this machine --------------------------------------------------------------------
    Cause("staging_unusable", "the bridge's private staging directory cannot be made, or a "
          "prompt's attachments cannot be written into it",
          "the staging directory {path} is unusable",
          "make it a writable directory, or set AGYBRIDGE_STAGING_DIR to one",
          False, BridgeCode.SETUP_UNUSABLE),
    Cause("session_db_unusable", "the session database cannot be opened or written",
          "the session database {path} is unusable: {detail}",
          "check the file and its directory (`agybridge doctor`), or set AGYBRIDGE_DB",
          False, elsewhere="`agybridge doctor`; the bridge refuses a bad AGYBRIDGE_DB at "
          "start (on stderr) and keeps sessions in memory if the file fails later (log)"),
    Cause("runtime_dir_unusable", "no private runtime directory for the permission gate",
          "no private runtime directory: {detail}",
          "set TMPDIR (or XDG_RUNTIME_DIR) to a short private path",
          False, elsewhere=_DOCTOR_ONLY + "; a session then reports gate_unavailable"),
    Cause("log_file_unusable", "the log file cannot be written (or, for "
          "`_agybridge/session/logs`, read)",
          "the log file {path} is unusable: {detail}",
          "fix its directory or set AGYBRIDGE_LOG_FILE (empty: no log file)",
          False, BridgeCode.SETUP_UNUSABLE, elsewhere=_DOCTOR_ONLY),
    Cause("platform_unsupported", "the operating system is not one agybridge supports",
          "{platform} is not supported", "run agybridge on Linux or macOS",
          False, elsewhere=_DOCTOR_ONLY),
    Cause("cwd_missing", "the session's working directory went away while the session lived "
          "(a `session/new` for a missing cwd is invalid_params)",
          "the working directory {path} does not exist",
          "pick an existing directory for the session", False, ErrorCode.RESOURCE_NOT_FOUND),
    Cause("mcp_config_unwritable", "the MCP server configuration cannot be written for agy",
          "the MCP configuration {path} cannot be written",
          "make the staging directory writable (AGYBRIDGE_STAGING_DIR)",
          False, elsewhere="`session/new` reports it as staging_unusable (the config is "
          "written into the staging directory)"),
    Cause("mcp_server_unanswered", "`_agybridge/mcp/test` started (or called) one of the "
          "session's MCP servers and it did not answer MCP's `initialize`",
          "the MCP server {name} did not answer initialize: {detail}",
          "fix the server's command, arguments, env or URL in the editor's MCP settings "
          "(`error.kind` says what went wrong), then open the session again",
          False, elsewhere="`_agybridge/mcp/test`'s result (`answered: false`, `error`): "
          "the test itself succeeded"),
    # --- the client ----------------------------------------------------------------------
    Cause("invalid_params", "a request's params are malformed or name something impossible",
          "Invalid params: {detail}", "fix the request", False, ErrorCode.INVALID_PARAMS),
    Cause("logout_unsupported", "the client called `logout`: agy has no sign-out command a "
          "program can run, and the bridge never touches agy's credentials",
          "agybridge cannot sign agy out: agy has no sign-out command a program can run (none "
          "among its subcommands or print-mode commands), and agybridge never touches agy's "
          "credentials itself, so initialize does not advertise auth.logout",
          "sign out in agy itself", False, ErrorCode.METHOD_NOT_FOUND),
    Cause("list_filter_invalid", "`session/list`'s folder filter "
          "(`_meta.additionalDirectories`) is not an array of absolute paths",
          "session/list's folder filter {field} must be an array of absolute directory paths",
          "send absolute paths, or leave the filter out to list every session", False,
          ErrorCode.INVALID_PARAMS),
    Cause("attachment_invalid", "an image, audio clip or embedded file in a prompt is not "
          "strict base64, is empty, or its bytes are not a type the bridge can stage",
          "the attachment at {path} cannot be staged for agy",
          "send the file's bytes as plain base64 (no data: URL) in a supported format",
          False, ErrorCode.INVALID_PARAMS),
    Cause("attachment_too_large", "an attachment, or a prompt's attachments together, are "
          "larger than the limit",
          "the attachment at {path} is larger than the {limitBytes}-byte limit",
          "send a smaller file, or raise AGYBRIDGE_MAX_ATTACHMENT_BYTES / "
          "AGYBRIDGE_MAX_PROMPT_ATTACHMENT_BYTES", False, ErrorCode.INVALID_PARAMS),
    Cause("unknown_method", "the client called a method this bridge does not offer",
          "Method not found: {method}", "call only what `initialize` advertised",
          False, ErrorCode.METHOD_NOT_FOUND),
    Cause("invalid_request", "a request came before `initialize`, or a line is not one "
          "JSON-RPC request (a batch, a reused id, a line over the size limit)",
          "Invalid request: {detail}", "send `initialize` first, then one request per line",
          False, ErrorCode.INVALID_REQUEST),
    Cause("invalid_json", "a line the client sent is not JSON",
          "Parse error: {detail}", "send one JSON-RPC message per line", False,
          ErrorCode.PARSE_ERROR),
    Cause("unknown_session", "a request names a session this bridge does not have",
          "unknown session {session_id}", "start or load the session first",
          False, ErrorCode.RESOURCE_NOT_FOUND),
    Cause("nothing_to_retry", "`_agybridge/session/retry` when the session's last turn did "
          "not fail (it ended, was cancelled, or there was none)",
          "the session's last turn did not fail: there is nothing to retry",
          "send the prompt again with `session/prompt` to run it once more",
          False, ErrorCode.INVALID_REQUEST),
    Cause("retry_while_running", "`_agybridge/session/retry` while a turn runs (whether "
          "it fails is not known yet)",
          "a turn is running: retry when it has ended",
          "wait for the running turn's answer, or `session/cancel` it first", True,
          ErrorCode.INVALID_REQUEST),
    Cause("cancelled", "the client cancelled the request or the turn",
          "cancelled", "nothing: the client asked for it", False,
          ErrorCode.REQUEST_CANCELLED, CANCELLED),
    # --- the bridge ----------------------------------------------------------------------
    Cause("bridge_bug", "the bridge itself failed (a bug)",
          "internal error in agybridge: {detail}",
          "report it with `agybridge logs` attached", False, ErrorCode.INTERNAL_ERROR),
)  # fmt: skip

#: The catalogue, by id.
CAUSES: dict[str, Cause] = {row.id: row for row in _ROWS}


def cause(cause_id: str) -> Cause:
    """The row ``cause_id`` names (KeyError: not a catalogue id, a bug)."""
    return CAUSES[cause_id]


def meta(cause_id: str, **fields: Any) -> dict[str, Any]:
    """``_meta`` naming the cause: ``{"agybridge": {"cause": id, ...fields}}``;
    fields that are None are left out."""
    cause(cause_id)  # a typo is a bug, found here
    found = {key: value for key, value in fields.items() if value is not None}
    return {"agybridge": {"cause": cause_id, **found}}


def cause_of(meta_or_data: object) -> str | None:
    """The cause id a ``_meta`` (or an error's ``data`` holding one) names."""
    if not isinstance(meta_or_data, Mapping):
        return None
    holder = meta_or_data.get("_meta", meta_or_data)
    mine = holder.get("agybridge") if isinstance(holder, Mapping) else None
    found = mine.get("cause") if isinstance(mine, Mapping) else None
    return found if isinstance(found, str) and found in CAUSES else None


def exit_description(returncode: int | None) -> str:
    """``exit code 2`` or ``killed by SIGSEGV`` (a negative return code is a signal)."""
    if returncode is None:
        return "no exit status"
    if returncode < 0:
        return f"killed by {signal_name(-returncode)}"
    return f"exit code {returncode}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_fields(returncode: int | None) -> dict[str, Any]:
    """The structured fields of an exit: ``exitCode`` or ``signal`` (by name)."""
    if returncode is not None and returncode < 0:
        return {"signal": signal_name(-returncode)}
    return {"exitCode": returncode}


# --- agy's failures, classified once --------------------------------------------------

# "UNAVAILABLE (code 503)" in the words of a failure.
_STATUS_CODE = re.compile(r"\b([A-Z_]{5,}) \(code (\d{3})\)")
_QUOTA_WORDS = ("quota", "credits balance", "resets in")


_AUTH_MARKERS = (
    "not logged into antigravity",
    "authentication required",
    # `agy -p /hooks` signed out (GOBBY capture, fake_agy ``_hooks_command``).
    "authentication failed",
    "authentication timed out",
    "auth timed out",
    "authentication expired",
    "please sign in",
)


def is_auth_text(text: str) -> bool:
    """agy's words say it is signed out (a stderr line or a ``result.error``, such as
    1.3.2's ``authentication failed or timed out``, contract.md §11): agy's stderr
    classifier and `classify_agy_failure` both read it."""
    lowered = text.lower()
    return any(marker in lowered for marker in _AUTH_MARKERS)


def classify_agy_failure(
    text: str, details: Mapping[str, Any] | None = None, *, auth_failed: bool = False
) -> str:
    """The cause id of an agy failure: its words (``result.error``, an
    ``error:`` line on stderr) and, if agy printed one, its ``AGY_ERROR`` fields
    (``error_code``, ``status``). A 5xx is ``unavailable`` wherever it happens;
    a quota is ``quota`` with or without ``AGY_ERROR``."""
    details = details or {}
    code = details.get("error_code", details.get("errorCode"))
    status = str(details.get("status") or "")
    said = _STATUS_CODE.search(text)
    if code is None and not status and said is not None:
        status, code = said.group(1), int(said.group(2))
    lowered = (text + " " + str(details.get("short_error", ""))).lower()
    if auth_failed or is_auth_text(lowered):
        return "not_signed_in"
    if text.startswith("invalid model selection"):
        return "invalid_model"
    if lowered.startswith("print timeout"):  # the result's error when it fired
        return "print_timeout"
    if text.strip().lower() == "interrupted":  # agy's answer to a SIGINT (contract.md §5)
        return "interrupted"
    if (
        (isinstance(code, int) and code >= 500)
        or status == "UNAVAILABLE"
        or "overloaded" in lowered
    ):
        return "unavailable"
    if any(word in lowered for word in _QUOTA_WORDS) or details.get("resets_in"):
        return "quota"
    if code == 429 or status == "RESOURCE_EXHAUSTED":
        return "rate_limited"
    return "agy_error"
