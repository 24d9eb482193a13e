"""A faithful, scenario-driven stand-in for Google's Antigravity CLI (``agy``).

Theory of operation
-------------------
The fake is a stdlib-only program run as a child process, exactly like agy: argv in,
NDJSON on stdout, human text on stderr, an exit code. Everything it does is taken from
``shared/agy/contract.md`` (cited as §n) and the captures in ``shared/agy/samples``:

1. argv is parsed like Go's ``flag`` package (``_fake_cli``); errors print Go's message
   plus usage and exit 2 (§1). Subcommands ``models``/``agents`` answer and exit (§6).
2. Pre-turn failures (unknown ``--model``, bad ``--json-schema``, a 503 at startup) print
   one ERROR ``result`` with ``conversation_id:""`` and no ``init``, then exit 1 (§3.1, §3.5).
3. Otherwise the conversation is created or resumed from the state dir, ``init`` is
   printed before stdin is read (§3.1), and the process serves stdin one line at a time:
   each line is validated (§2.2, ``_fake_protocol``) and a valid user message runs one
   turn of the selected scenario (``_fake_scenarios``) to its single ``result``. Lines that
   arrive meanwhile wait in the pipe: they are queued, never steered (§2.3).
4. EOF finishes the current turn and exits 0 (§2.4). SIGINT ends a running turn with
   ``result{status:ERROR,error:"interrupted"}`` and exit 1, SIGTERM with ``context
   canceled`` (§5); signals are turned into exceptions only at waiting points
   (``_fake_io.Interrupts``), so no stdout line is ever cut in half by one.
5. Hooks (``shared/agy/hooks-and-tools.md`` part A, ``_fake_hooks``): at startup the fake
   loads ``$HOME/.gemini/config/hooks.json`` and ``<root>/{.agents,.agent,_agents,_agent}/
   hooks.json`` of every absolute ``--add-dir`` root (never the cwd as such), dropping a
   file agy would reject. ``-p /hooks`` lists them without a turn (json envelope with
   ``command.data.hooks``, ``num_turns:0``; stream-json: ``command_result`` + ``result``;
   text: TSV). Every gated tool step (all tool steps except ``finish``) prints its ACTIVE
   line, then runs each enabled matching PreToolUse handler (``sh -c``, stdin = the
   camelCase payload with the full tool arguments, its own process group, its
   ``timeout``) while the turn prints nothing; then agy's own headless check applies
   (a hook cannot lift a soft-deny, §A7). A denied or failed hook ends the step ERROR
   (``tool call denied by pre-tool hook: R`` / ``JSON hook "jsonhook__…" failed: …``),
   the tool does not run, the model explains, and the turn is SUCCESS (1.2.x, §A6).
   SIGINT/SIGTERM or ``--print-timeout`` during a hook kill it first.

Modules: ``_fake_cli`` (argv, usage, models), ``_fake_protocol`` (stdin validation, usage
arithmetic, captures; pure), ``_fake_io`` (stdout/stderr/stdin, signals, launch log),
``_fake_runtime`` (knobs, conversation state, ``Session``/``Turn``), ``_fake_hooks``
(hooks.json, ``/hooks``, handler runs), ``_fake_scenarios``.

Entry points: ``python -m fake_agy`` and ``bin/fake-agy`` (deliberately no console
script). Run ``bin/fake-agy --print hi --output-format stream-json`` for one turn.

Knobs (environment)
-------------------
``FAKE_AGY_SCENARIO``        scenario per turn, comma-separated (turn i uses item i, the last
                             repeats); a prompt containing ``[fake-agy:NAME]`` overrides it.
                             Default ``echo``. Names: see ``_fake_scenarios.SCENARIOS``:
                             echo, slow, ignore-sigint, crash, truncated, tool, tool-error,
                             quota, unavailable, soft-deny, print-timeout, noise, silent-exit,
                             multi-response, total-usage (usage with only ``total_tokens``),
                             agy 1.3.x's partial-error (an answer, then an ERROR result
                             holding it) and subagent, 1.2.x's permission-check-failed,
                             late-event (a step after an ERROR result; ``_fake_edge``),
                             interrupted, quota-words, killed (``_fake_edge``), and
                             for rendering tests edit, multi-tool,
                             image-out, schema, unknown-events, big-output, huge-line,
                             for live smoke matrices recall (names the numbers the
                             conversation's earlier prompts held: history survives
                             ``--conversation``) and read (view_file of the first word of
                             the prompt naming a workspace file, then a reply quoting it),
                             for benchmarks flood (``[fake-agy:flood] N``: N text deltas
                             as fast as the fake can write them), paced
                             (``[fake-agy:paced] [N] [INTERVAL_MS]``, default 500 and 5: N
                             text deltas ``"<i>@<time.monotonic_ns()> "``, one written every
                             INTERVAL_MS, for latency), and
                             for permission tests permission-tool (run_command, then
                             write_to_file and view_file of one workspace file; a hook-blocked
                             step does not stop the turn), gated-command (one run_command
                             of the rest of the prompt, gated but never run), ask-question
                             (agy's ask_question, ``[multi] [free] [two]``: settled by agy
                             itself unless a PreToolUse hook denies it, whose reason the
                             reply restates).
                             ``unavailable`` as the first item fails at startup. Words after
                             a directive are the scenario's arguments:
                             ``[fake-agy:edit] PATH...`` (files to change, relative to the
                             workspace; created by a write_to_file step if missing),
                             ``[fake-agy:image-out] [outside] [not-image]``,
                             ``[fake-agy:permission-tool] [PATH]`` (default
                             ``fake-agy-permission.txt``),
                             ``[fake-agy:schema] [stream]``, and ``gate=PATH`` for
                             big-output/huge-line (hold the turn after the big payload until
                             PATH exists) and edit (hold the replace step ACTIVE, before
                             the write, until PATH exists): a test control, not agy
                             behaviour. Scenarios that touch files work in the workspace:
                             the first ``--add-dir``, else the cwd.
``FAKE_AGY_REPLAY``          an ``.ndjson`` capture: its ``init`` is printed at startup (if it
                             has one) and each stdin turn replays the capture's next turn
                             verbatim: all lines after the previous ``result`` through the
                             next one (a capture's user_input is included; nothing is
                             dropped, and a trailing group without a result is a last, open
                             turn). A capture holding only a result (invalid model) has no
                             init and replays on the first turn. Once the capture runs out,
                             turns are served by ``FAKE_AGY_SCENARIO`` (default ``echo``),
                             continuing the capture's conversation id, step indexes,
                             ``num_turns``, usage and duration.
``FAKE_AGY_LAUNCH_LOG``      append JSON lines: one per launch ``{pid, argv, cwd, pgid, sid,
                             env}`` (argv without the program name; env = ``FAKE_AGY_*`` and
                             ``AGY_*`` only), one per stdin line ``{pid, stdin}``, one per
                             spawned child ``{pid, child:{pid,pgid,sid,own_session}}``, one per
                             ignored signal ``{pid, signal, ignored}`` and ``{pid, exit}``;
                             hooks add ``{pid, debug}`` lines (``failed to parse hooks.json at
                             <path>: …``, ``loaded N named hooks from M hooks.json file(s)``)
                             and one ``{pid, hook:{id,tool,step_index,pid,returncode,verdict}}``
                             per handler run.
``FAKE_AGY_STATE_DIR``       conversation files (default ``<tmp>/fake-agy-state-<uid>``).
``FAKE_AGY_STARTUP_DELAY``   seconds before ``init`` (and before subcommands answer).
``FAKE_AGY_STARTUP_HANG``    ``silent``: a stream-json session prints nothing and waits for a
                             signal (stuck at start-up); ``garbage``: one non-JSON line first.
``FAKE_AGY_HANG_WHILE``      hang only launches that start while this path exists.
``FAKE_AGY_DISCOVERY_GATE``  ``models``/``agents`` wait until this path exists.
``FAKE_AGY_LAZY_INIT=1``     print ``init`` when the first stdin line arrives instead.
``FAKE_AGY_FRAGMENT_DELAY``  seconds between streamed events (default 0.01).
``FAKE_AGY_SLOW_INTERVAL``   ``slow``: seconds between fragments (default 0.2).
``FAKE_AGY_SLOW_SECONDS``    ``slow``: length of the turn (default 60).
``FAKE_AGY_RELEASE_FILE``    ``slow``: tick until this file exists instead (tests end the turn).
``FAKE_AGY_SPAWN_CHILDREN=0`` ``slow``: do not start the two ``sleep`` children.
``FAKE_AGY_CHILD_SECONDS``   lifetime of those children (default 120).
``FAKE_AGY_CHILD_HOLDS_STDIO=1`` children inherit stdout/stderr (hold the pipes open).
``FAKE_AGY_QUOTA_CONTINUE=1`` API-error turns keep the session alive (CL 1.2.10).
``FAKE_AGY_CRASH_EXIT_CODE`` exit code of ``crash``/``truncated`` (default 1; Go panics exit 2).
``FAKE_AGY_CRASH_SIGNAL``    the signal ``killed`` dies of (default SIGSEGV).
``FAKE_AGY_SIGNED_OUT=1``    subcommands fail with the not-logged-in error; a session's first
                             turn fails with ``authentication required``, exit 1.
``FAKE_AGY_AGENTS``          names printed by ``agents`` (comma-separated).
``FAKE_AGY_VERSION``         the ``--version`` line (default 1.2.14). From 1.3.2 on, ``init``
                             always names the model (``gemini-3.8-flash`` without
                             ``--model``) and a signed-out session prints no ``init``,
                             1.3.2's two stderr lines and its ERROR result.
``FAKE_AGY_EDIT_DELAY``      seconds an edit tool step stays ACTIVE before the file changes
                             (default 0.2; the tool's run time in real agy).
``FAKE_AGY_EXIT_DELAY``      seconds between the last output of a turn that ends the process
                             (quota's exit 3, crash...) and the exit (default 0; agy: 0.05-0.3).
``FAKE_AGY_RESUME_USAGE=1``  a resumed conversation's ``result.usage`` continues the sum of
                             its earlier processes (MJ, contract.md §3.5) instead of
                             starting from zero in the new process.
``FAKE_AGY_STDOUT_LOG``      append every stdout line as ``{pid, stdout}`` (``partial: true``
                             for a cut line): the raw agy lines a bridge was given.
``FAKE_AGY_IGNORE_HOOKS=1``  load no hooks.json at all (a gate that silently failed to load,
                             hooks-and-tools.md §A5): ``/hooks`` lists none, nothing runs.
``FAKE_AGY_COMMANDS_NEED_APPROVAL=1`` every run_command step needs approval, as with agy's
                             default rules (§A9): in request-review mode (no
                             ``--dangerously-skip-permissions``) it is soft-denied after the
                             hooks ran. Off by default; ``soft-deny`` and ``permission-tool``
                             commands always need it.
``FAKE_AGY_TOOL_PERMISSION`` agy's own settings.json ``toolPermission`` (request-review, the
                             default; always-proceed, strict, proceed-in-sandbox): reported as
                             ``init.permission_mode`` unless ``--dangerously-skip-permissions``
                             makes it ``always-proceed``; ``always-proceed`` denies nothing.
``FAKE_AGY_DENY_ALWAYS=1``   tools that need approval are soft-denied even in always-proceed
                             mode, as agy's hardcoded protection boundary denies after a hook
                             ``allow`` (hooks-and-tools.md §A6): a denial no allowance lifts.
``HOME``                     the user-level ``.gemini/config/hooks.json`` is read below it.
A bad knob value exits 64 with a ``fake-agy:`` message on stderr.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from ._fake_cli import (
    MODELS,
    SUBCOMMANDS,
    TOOLS,
    VERSION,
    FlagError,
    Options,
    go_quote,
    invalid_model_error,
    model_display_name,
    parse_argv,
    parse_go_duration,
    usage_text,
)
from ._fake_edge import EDGE_SCENARIOS, hang_at_startup, wait_discovery_gate
from ._fake_hooks import DEFAULT_MODEL_NAME, HookSet, load_hooks
from ._fake_io import (
    Interrupted,
    Interrupts,
    JsonObject,
    LaunchLog,
    LineReader,
    Output,
    dumps,
    stderr_line,
    write_all,
)
from ._fake_protocol import Capture, Fatal, Ignored, Usage, parse_capture, parse_input_line
from ._fake_runtime import ConversationState, Knobs, PrintTimeout, Session, StateStore, Turn
from ._fake_scenarios import (
    DIRECTIVE,
    UNAVAILABLE_ERROR,
    Scenario,
    replay,
    run_scenario,
    signed_out,
)
from ._fake_scenarios import (
    SCENARIOS as BASE_SCENARIOS,
)

SCENARIOS = {**BASE_SCENARIOS, **EDGE_SCENARIOS}

#: Exit code for misuse of the fake itself (bad knob), distinct from agy's own 1/2/3.
EXIT_FAKE_MISUSE = 64
NOT_LOGGED_IN = "error getting token source: You are not logged into Antigravity."


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fake agy with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    # Die on a closed stdout like a Go program (SIGPIPE on fd 1/2), and let SIGINT kill
    # quietly until a session installs its own handlers.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    args = list(sys.argv[1:] if argv is None else argv)
    log = LaunchLog(os.environ.get("FAKE_AGY_LAUNCH_LOG"))
    log.record(
        {
            "argv": args,
            "cwd": os.getcwd(),
            "pgid": os.getpgrp(),
            "sid": os.getsid(0),
            "env": {
                key: value
                for key, value in sorted(os.environ.items())
                if key.startswith(("FAKE_AGY_", "AGY_"))
            },
        }
    )
    code = _run(args, log)
    log.record({"exit": code})
    return code


def _run(args: list[str], log: LaunchLog) -> int:
    try:
        opts = parse_argv(args)
    except FlagError as exc:
        if exc.message is not None:
            stderr_line(exc.message)
        write_all(2, usage_text().encode())
        return 0 if exc.message is None else 2
    try:
        knobs = Knobs.from_env(os.environ, VERSION)
    except ValueError as exc:
        stderr_line(f"fake-agy: {exc}")
        return EXIT_FAKE_MISUSE
    unknown = [name for name in knobs.scenarios if name not in SCENARIOS]
    if unknown:
        known = ", ".join(SCENARIOS)
        stderr_line(f"fake-agy: unknown FAKE_AGY_SCENARIO {unknown[0]!r}; known: {known}")
        return EXIT_FAKE_MISUSE
    if opts.version:
        write_all(1, f"{knobs.version}\n".encode())
        return 0
    if opts.positional and opts.positional[0] in dict(SUBCOMMANDS):
        return _subcommand(opts.positional[0], knobs)
    return _serve(opts, knobs, log)


def _subcommand(name: str, knobs: Knobs) -> int:
    """``agy models`` / ``agy agents`` (contract.md §6); stdin is never read."""
    time.sleep(knobs.startup_delay_s)  # the real ones do a remote fetch (~6-8 s)
    if name in ("models", "agents"):
        wait_discovery_gate()
    if name == "help":
        write_all(1, usage_text().encode())
        return 0
    if name not in ("models", "agents", "agent"):
        stderr_line(f"fake-agy: the {name!r} subcommand is not modelled")
        return 1
    if knobs.signed_out:
        stderr_line(NOT_LOGGED_IN)
        return 1
    if name == "models":
        stderr_line("Fetching available models...")
        lines = [f"{slug}\t{display}" for slug, display in MODELS]
    else:
        lines = list(knobs.agents)
    write_all(1, "".join(f"{line}\n" for line in lines).encode())
    return 0


def _check_options(opts: Options) -> str | None:
    """Startup validation after flag parsing; returns the stderr text of a failure."""
    prompt = opts.print_prompt
    if prompt is not None and len(prompt) > 1 and prompt.startswith("-"):
        # 1.1.18+ (text measured on 1.2.7, samples/stderr-lines-observed.txt).
        return (
            f"Error: --print took {go_quote(prompt)} as its prompt, so the intended prompt "
            "was\nleft as an argument and ignored."
        )
    # The wording of the checks below is not captured; the rules are (contract.md §1).
    if opts.output_format not in ("text", "json", "stream-json"):
        shown = go_quote(opts.output_format)
        return f"error: invalid --output-format {shown} (text, json, stream-json)"
    if opts.input_format not in ("text", "stream-json"):
        shown = go_quote(opts.input_format)
        return f"error: invalid --input-format {shown} (text, stream-json)"
    if opts.input_format == "stream-json" and opts.output_format != "stream-json":
        return "error: --input-format stream-json requires --output-format stream-json"
    if opts.mode is not None and opts.mode not in ("accept-edits", "plan"):
        return f"error: invalid --mode {go_quote(opts.mode)} (accept-edits, plan)"
    if opts.input_format != "stream-json" and not prompt:
        return (
            "error: interactive mode needs a terminal; pass --print <prompt> or "
            "--input-format stream-json --output-format stream-json"
        )
    return None


def _load_schema(value: str) -> JsonObject | str:
    """The ``--json-schema`` object, or the error text (1.2.14 rules, contract.md §1.1)."""
    try:
        if value.lstrip().startswith("{"):
            schema = json.loads(value)
        elif Path(value).is_file():
            schema = json.loads(Path(value).read_text())
        else:
            return f"invalid --json-schema {go_quote(value)}: not a JSON object or a schema file"
    except (OSError, ValueError) as exc:
        return f"invalid --json-schema {go_quote(value)}: {exc}"
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return f'invalid --json-schema {go_quote(value)}: the root must be "type": "object"'
    return schema


def _pre_turn_error(out: Output, text: str) -> int:
    """The no-init ERROR result of a failure before any conversation exists (§3.5)."""
    out.event(
        "result",
        {
            "conversation_id": "",
            "status": "ERROR",
            "response": "",
            "error": text,
            "duration_seconds": 0,
            "num_turns": 0,
            "usage": Usage().to_json(),
        },
    )
    out.close()
    # 1.1.14 was silent on stderr; 1.2.7 and the docs print the reason (contract.md §4).
    stderr_line(f"error: {text}")
    return 1


def _state_dir() -> Path:
    configured = os.environ.get("FAKE_AGY_STATE_DIR")
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"fake-agy-state-{os.getuid()}"


def _serve(opts: Options, knobs: Knobs, log: LaunchLog) -> int:
    """Everything after argv parsing for print / stream-json sessions."""
    failure = _check_options(opts)
    if failure is not None:
        stderr_line(failure)
        return 1
    if opts.mode is not None and opts.disable_slash_commands:
        # samples/tiezbro-1.1.14-mode-plan-warning.stderr.txt
        stderr_line(
            f"warning: --mode {opts.mode} has no effect while slash command expansion is disabled."
        )
    out = Output(opts.output_format, tee=knobs.stdout_log)
    hooks = HookSet() if knobs.ignore_hooks else load_hooks(opts.add_dirs, _home(), log)
    if _is_hooks_command(opts):
        return _hooks_command(out, hooks, knobs)
    display_model = None
    if opts.model:
        display_model = model_display_name(opts.model)
        if display_model is None:
            return _pre_turn_error(out, invalid_model_error(opts.model, opts.effort or ""))
    schema: JsonObject | None = None
    if opts.json_schema is not None:
        loaded = _load_schema(opts.json_schema)
        if isinstance(loaded, str):
            return _pre_turn_error(out, loaded)
        schema = loaded
    capture: Capture | None = None
    replay_path = os.environ.get("FAKE_AGY_REPLAY")
    if replay_path:
        try:
            capture = parse_capture(Path(replay_path).read_text())
        except OSError as exc:
            stderr_line(f"fake-agy: cannot read FAKE_AGY_REPLAY: {exc}")
            return EXIT_FAKE_MISUSE

    interrupts = Interrupts(
        lambda signum: log.record({"signal": signal.Signals(signum).name, "ignored": True})
    )
    interrupts.ignore_sigint = "ignore-sigint" in knobs.scenarios
    try:
        deadline = time.monotonic() + knobs.startup_delay_s
        while (left := deadline - time.monotonic()) > 0:
            interrupts.wait(None, left)
    except Interrupted as exc:
        stderr_line(_interrupt_line(exc))
        return 1
    if opts.input_format == "stream-json":
        hung = hang_at_startup(knobs.startup_hang, out, interrupts)
        if hung is not None:
            return hung
    if capture is None and knobs.scenarios[0] == "unavailable":
        return _pre_turn_error(out, UNAVAILABLE_ERROR)

    session = _open_session(
        opts,
        knobs=knobs,
        log=log,
        out=out,
        interrupts=interrupts,
        schema=schema,
        capture=capture,
        hooks=hooks,
    )
    init = _init_line(opts, session, display_model, schema, capture)
    if knobs.signed_out and knobs.at_least(1, 3, 2):
        init = None  # 1.3.2 signed out: no init, only the ERROR result (contract.md §11)
    stream_input = opts.input_format == "stream-json"
    if init is not None and not (knobs.lazy_init and stream_input):
        out.raw(init)
    if not stream_input:
        # One-shot print mode: a single turn with the argv prompt (contract.md §1.3, MD).
        code = _serve_turn(session, _argv_prompt(opts.print_prompt or ""), 0, capture)
        out.close()
        return code or 0
    return _serve_stream(session, opts, init if knobs.lazy_init else None, capture, log)


def _open_session(
    opts: Options,
    *,
    knobs: Knobs,
    log: LaunchLog,
    out: Output,
    interrupts: Interrupts,
    schema: JsonObject | None,
    capture: Capture | None,
    hooks: HookSet,
) -> Session:
    """Create or resume the conversation (``--conversation``, ``-c``; contract.md §1.1)."""
    workspace = os.path.realpath(opts.add_dirs[0]) if opts.add_dirs else os.getcwd()
    store = StateStore(_state_dir())
    state: ConversationState | None = None
    if capture is not None:
        state = ConversationState(
            capture.conversation_id or str(uuid.uuid4()),
            capture.last_step_index,
            capture.num_turns,
        )
    elif opts.conversation:
        state = store.load(opts.conversation)
        if state is None:
            # Unknown or malformed id: warn and fork a new conversation (§1.1, DSH 1.1.13).
            stderr_line(f'warning: conversation "{opts.conversation}" not found')
    elif opts.continue_last:
        state = store.latest(workspace)
    if state is None:
        state = ConversationState(str(uuid.uuid4()), workspace=workspace)
    # A resumed conversation continues its step indexes after a gap (§3.2).
    next_index = state.last_step_index + 2 if state.last_step_index >= 0 else 0
    if capture is not None:
        next_index = state.last_step_index + 1
    timeout_s = parse_go_duration(opts.print_timeout)
    session = Session(
        conversation_id=state.conversation_id,
        next_step_index=next_index,
        num_turns=state.num_turns,
        out=out,
        interrupts=interrupts,
        knobs=knobs,
        log=log,
        store=None if capture is not None else store,
        workspace=workspace,
        # The flag wins over settings.json's toolPermission (contract.md §1.1, §11).
        permission_mode="always-proceed" if opts.skip_permissions else knobs.tool_permission,
        json_schema=schema,
        print_timeout_s=timeout_s,
        print_timeout_text=opts.print_timeout if timeout_s > 0 else "5m0s",
        state_root=store.root,
        hooks=hooks,
        # Relative roots are no workspace for hooks (hooks-and-tools.md §A2, _fake_hooks).
        workspace_paths=[os.path.realpath(d) for d in opts.add_dirs if os.path.isabs(d)],
        model_name=_model_slug(opts.model) or DEFAULT_MODEL_NAME,
        prompts=state.prompts,
    )
    if capture is not None:
        session.usage = capture.usage
        session.duration_s = capture.duration_seconds
    elif knobs.resume_usage and state.num_turns:
        # MJ: "result.usage includes earlier turns too" even across --conversation (§3.5).
        session.usage = Usage.from_json(state.usage)
    # The conversation exists from process start, even if no turn runs (§2.4, §7).
    session.persist()
    return session


#: The model 1.3.2's ``init`` names when no ``--model`` is given
#: (samples/untether-1.3.2-init-model-ok).
DEFAULT_MODEL_SLUG = "gemini-3.8-flash"


def _init_line(
    opts: Options,
    session: Session,
    display_model: str | None,
    schema: JsonObject | None,
    capture: Capture | None,
) -> str | None:
    """The ``init`` event (contract.md §3.1); a replay uses the capture's own, if any."""
    if capture is not None:
        return capture.init_line
    init: JsonObject = {}
    if display_model is not None:
        init["model"] = display_model  # with --model, echoing the display name
    elif session.knobs.at_least(1, 3, 2):
        init["model"] = DEFAULT_MODEL_SLUG  # present from 1.3.2 on (contract.md §11)
    if opts.agent:
        init["agent"] = opts.agent
    init["cwd"] = os.path.realpath(os.getcwd())
    init["tools"] = list(TOOLS)
    init["permission_mode"] = session.permission_mode
    if schema is not None:
        init["json_schema"] = schema
    return dumps({"event": "init", "conversation_id": session.conversation_id, "init": init})


def _home() -> str | None:
    return os.environ.get("HOME") or None


def _model_slug(value: str | None) -> str | None:
    """The ``agy models`` slug of a ``--model`` value (slug or display name)."""
    for slug, display in MODELS:
        if value in (slug, display):
            return slug
    return None


def _is_hooks_command(opts: Options) -> bool:
    """``-p /hooks`` in print mode: answered by the CLI itself (contract.md §6)."""
    prompt = (opts.print_prompt or "").strip()
    return (
        opts.input_format != "stream-json"
        and not opts.disable_slash_commands
        and prompt.lower() == "/hooks"
    )


def _hooks_command(out: Output, hooks: HookSet, knobs: Knobs) -> int:
    """``agy -p /hooks``: the loaded hooks without a model turn, exit 0.

    Shapes from [GOBBY] command-captures.json (1.1.18; hooks-and-tools.md §A2): ``json`` is
    the result envelope (``conversation_id:""``, ``num_turns:0``, zero usage) plus
    ``command:{name:"hooks",data:{hooks:[…]}}``, ``response`` one TSV line per action;
    ``stream-json`` is a ``command_result`` line, then the ``result`` (as for ``agy
    --output-format stream-json models`` in the same capture; no ``init``); ``text``
    prints the TSV. Signed out: the captured ``authentication failed or timed out``
    ERROR, exit 1.
    """
    time.sleep(knobs.startup_delay_s)
    envelope: JsonObject = {"conversation_id": "", "status": "SUCCESS", "response": ""}
    counters: JsonObject = {"duration_seconds": 0, "num_turns": 0, "usage": Usage().to_json()}
    if knobs.signed_out:
        error = "authentication failed or timed out"
        out.event("result", {**envelope, "status": "ERROR", "error": error, **counters})
        out.close()
        stderr_line(f"error: {error}")
        return 1
    response, command = hooks.listing()
    if out.format == "stream-json":
        out.raw(dumps({"event": "command_result", "command": command}))
    elif out.format == "text":
        write_all(1, response.encode())
    out.event("result", {**envelope, "response": response, **counters, "command": command})
    out.close()
    return 0


def _argv_prompt(prompt: str) -> str:
    # ``--print @/path/prompt.md`` reads the prompt from a file (contract.md §1.3, MD).
    if prompt.startswith("@") and Path(prompt[1:]).is_file():
        return Path(prompt[1:]).read_text()
    return prompt


def _serve_stream(
    session: Session,
    opts: Options,
    lazy_init: str | None,
    capture: Capture | None,
    log: LaunchLog,
) -> int:
    """The stream-json input loop: one line, one whole turn, next line (contract.md §2)."""
    reader = LineReader(session.interrupts)
    turns = 0
    while True:
        try:
            line = reader.read_line()
        except Interrupted as exc:
            # Idle: no turn to answer, so no result; agy is gone either way (§5).
            stderr_line(_interrupt_line(exc))
            return 1
        if line is None:
            session.out.close()
            return 0  # EOF between turns (§2.4)
        log.record({"stdin": line.decode("utf-8", errors="replace")})
        if lazy_init is not None:
            session.out.raw(lazy_init)  # AT's claim: init only after the first input
            lazy_init = None
        verdict = parse_input_line(line, slash_commands=not opts.disable_slash_commands)
        if verdict is None:
            continue
        if isinstance(verdict, Ignored):
            stderr_line(verdict.warning)
            continue
        if isinstance(verdict, Fatal):
            # Completed turns keep their results; the bad line ends the session (§2.2).
            Turn(session, "").finish("ERROR", error=verdict.error, response="", timed=False)
            if verdict.stderr is not None:
                stderr_line(verdict.stderr)
            return verdict.exit_code
        code = _serve_turn(session, verdict.text, turns, capture)
        turns += 1
        if code is not None:
            session.out.close()
            _linger(session)
            return code


def _linger(session: Session) -> None:
    """``FAKE_AGY_EXIT_DELAY``: a turn that ends the process (exit 3 after an API error, a
    crash) exits this long after its last output; agy took 0.05-0.3 s (contract.md §3.5,
    TT 1.1.13). Lines arriving meanwhile are never read. A signal ends the wait."""
    end = time.monotonic() + session.knobs.exit_delay_s
    try:
        while (left := end - time.monotonic()) > 0:
            session.interrupts.wait(None, left)
    except Interrupted:
        pass


def _pick_scenario(prompt: str, knobs: Knobs, turn_number: int) -> Scenario | str:
    """The turn's scenario: a ``[fake-agy:NAME]`` directive, else the env list."""
    directive = DIRECTIVE.search(prompt)
    if directive is not None:
        name = directive.group(1)
        return SCENARIOS.get(name, name)
    return SCENARIOS[knobs.scenarios[min(turn_number, len(knobs.scenarios) - 1)]]


def _serve_turn(
    session: Session, prompt: str, turn_number: int, capture: Capture | None
) -> int | None:
    """Run one turn to its result; returns an exit code to end the process, or None."""
    turn = Turn(session, prompt)
    knobs = session.knobs
    try:
        if knobs.signed_out:
            return signed_out(turn)
        if capture is not None and turn_number < len(capture.turns):
            replay(turn, capture.turns[turn_number])
            return None
        scenario = _pick_scenario(prompt, knobs, turn_number)
        if isinstance(scenario, str):
            message = f"fake-agy: unknown scenario directive {scenario!r}"
            turn.finish("ERROR", error=message, response="")
            stderr_line(message)
            return EXIT_FAKE_MISUSE
        return run_scenario(scenario, turn)
    except Interrupted as exc:
        if not turn.finished:
            sigint = exc.signum == signal.SIGINT
            turn.finish("ERROR", error="interrupted" if sigint else "context canceled")
        stderr_line(_interrupt_line(exc))
        return 1
    except PrintTimeout:
        # 1.1.28+: partial output, ERROR result, exit 0; bridges detect the stderr line
        # (contract.md §4, §8.2). The exact wording after "[agy] print timeout" is invented.
        limit = session.print_timeout_text
        stderr_line(f"[agy] print timeout ({limit}) reached; returning partial output")
        if not turn.finished:
            turn.finish("ERROR", error=f"print timeout ({session.print_timeout_text}) reached")
        return 0


def _interrupt_line(exc: Interrupted) -> str:
    # SIGINT: "error: interrupted" (1.2.7, kaoiro); SIGTERM: "context canceled" (1.2.14, KC).
    return "error: interrupted" if exc.signum == signal.SIGINT else "context canceled"


if __name__ == "__main__":
    sys.exit(main())
