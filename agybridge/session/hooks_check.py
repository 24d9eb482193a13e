"""Whether agy loads a session's permission gate: ``agy -p /hooks`` with the
gate's hook root as an ``--add-dir`` lists our hook, loaded from our file
(hooks-and-tools.md). The same run says whether agy is signed in. Used by the
gate's verification (gate.py) and by ``agybridge doctor``."""

from __future__ import annotations

import json
from collections.abc import Mapping

import attrs

from ..agy.signin import ProbeResult, SignIn, run_probe
from ..permissions import HOOK_NAME, HookRoot


@attrs.frozen
class HooksCheck:
    #: None when agy lists our gate; else why not.
    failure: str | None
    #: What the same run says about sign-in (a signed-out agy lists nothing).
    sign_in: ProbeResult


async def check_hooks_loaded(agy_bin: str, root: HookRoot, env: Mapping[str, str]) -> HooksCheck:
    """Run ``agy -p /hooks`` with ``root`` as an ``--add-dir``: is our hook loaded?

    Never raises for agy failures; cancellation kills agy (bound it with a deadline).
    """
    run = await run_probe(agy_bin, ("--add-dir", root.hook_dir), env)
    sign_in = run.sign_in
    if sign_in.state is SignIn.SIGNED_OUT:
        return HooksCheck(f"agy is not signed in ({sign_in.detail})", sign_in)
    if not run.spawned:
        return HooksCheck(f"could not run agy -p /hooks: {sign_in.detail}", sign_in)
    listed = _check_hooks_listing(run.stdout, root.hooks_json)
    if run.returncode != 0 and listed is None:
        listed = f"agy -p /hooks exited with {run.returncode}"
    return HooksCheck(listed, sign_in)


def _check_hooks_listing(stdout: bytes, hooks_json: str) -> str | None:
    """None if agy's ``/hooks`` JSON lists our gate loaded from our file."""
    text = stdout.decode("utf-8", "replace").strip()
    try:
        envelope = json.loads(text.splitlines()[-1] if text else "")
    except ValueError:
        return "agy -p /hooks printed no JSON"
    if isinstance(envelope, dict) and "result" in envelope:
        envelope = envelope["result"]
    command = envelope.get("command") if isinstance(envelope, dict) else None
    data = command.get("data") if isinstance(command, dict) else None
    hooks = data.get("hooks") if isinstance(data, dict) else None
    if not isinstance(hooks, list):
        return "agy -p /hooks listed no hooks"
    for hook in hooks:
        if (
            isinstance(hook, dict)
            and hook.get("name") == HOOK_NAME
            and hook.get("enabled", True)
            and hooks_json in str(hook.get("source", ""))
        ):
            return None
    return f"agy did not load the {HOOK_NAME} hook"
