#!/usr/bin/env python3
"""Which hook helper starts faster? agy runs it once per tool call (issue 6).

Run from the repository root with the project's venv::

    .venv/bin/python smoke/bench_hook.py            # 20 runs per variant and phase
    .venv/bin/python smoke/bench_hook.py --runs 5

Variants, each started the way agy starts a hook (``sh -c "<command>"``, payload on
stdin), runs interleaved so drift hits all alike:

* ``-m package``      ``python -m agybridge.permissions.hook`` (imports the package
                      ``__init__``s: agybridge.permissions re-exports the trio broker);
* ``-m bare package`` the same module as ``-m pkg.permissions.hook`` in a temp copy whose
                      ``__init__``s are empty: the best ``-m`` can do;
* ``script``          ``python …/hook.py`` (site-packages imported);
* ``script -I -S``    ``python -I -S …/hook.py`` (isolated, no site): the shipped choice;
* ``baseline -I -S``  ``python -I -S -c pass``: the interpreter alone, for scale.

Phases: ``start`` (no broker variables: the helper prints its deny at once, i.e. start-up
plus the decision print) and ``round trip`` (a live `Broker` that allows everything).
Reports go to ``smoke/reports/bench-hook-<UTC>.json`` and ``.md``; the Markdown is printed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from time import perf_counter
from typing import Any

import trio
from smokekit import facts_markdown, fmt, run_and_report, summarize

from agybridge.permissions import Broker, Decision, HookRequest, HookRoot, child_env
from agybridge.permissions import hook as hook_module

REPO = Path(__file__).resolve().parents[1]
PAYLOAD = json.dumps(
    {
        "toolCall": {"name": "view_file", "args": {"AbsolutePath": "/ws/README.md"}},
        "stepIdx": 3,
        "conversationId": "bench",
        "workspacePaths": ["/ws"],
    }
).encode()
RUN_LIMIT_S = 30.0


def variants() -> dict[str, list[str]]:
    py = sys.executable
    script = os.path.abspath(hook_module.__file__)
    return {
        "-m package": [py, "-m", "agybridge.permissions.hook"],
        "-m bare package": [py, "-m", "barepkg.permissions.hook"],
        "script": [py, script],
        "script -I -S": [py, "-I", "-S", script],
        "baseline -I -S": [py, "-I", "-S", "-c", "pass"],
    }


def make_bare_package(where: Path) -> Path:
    """A copy of hook.py inside a package whose __init__ files are empty."""
    pkg = where / "barepkg" / "permissions"
    pkg.mkdir(parents=True)
    (where / "barepkg" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    shutil.copy(hook_module.__file__, pkg / "hook.py")
    return where


async def time_once(argv: list[str], env: dict[str, str]) -> tuple[float, bytes]:
    start = perf_counter()
    with trio.fail_after(RUN_LIMIT_S):
        done = await trio.run_process(
            ["sh", "-c", shlex.join(argv)],
            stdin=PAYLOAD,
            capture_stdout=True,
            capture_stderr=True,  # runpy warns about the -m package variant
            env=env,
        )
    return perf_counter() - start, done.stdout


async def bench(runs: int, warmup: int) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="agyb-bench-"))
    root = HookRoot.create()
    try:
        bare = make_bare_package(scratch)
        table = variants()
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("AGYBRIDGE_")}
        pythonpath = os.pathsep.join([str(REPO), str(bare)])
        plain_env = {**base_env, "PYTHONPATH": pythonpath}
        gate_env = child_env(root, plain_env)

        async def allow(request: HookRequest) -> Decision:
            return Decision.allow()

        results: dict[str, dict[str, list[float]]] = {
            phase: {name: [] for name in table} for phase in ("start", "round trip")
        }
        outputs: dict[str, str] = {}
        broker = Broker(root.socket_path, root.token, allow, wait_s=10)
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            for phase, env in (("start", plain_env), ("round trip", gate_env)):
                for i in range(warmup + runs):
                    for name, argv in table.items():
                        if name.startswith("baseline") and phase != "start":
                            continue
                        elapsed, out = await time_once(argv, env)
                        outputs[f"{phase} / {name}"] = out.decode(errors="replace").strip()
                        if i >= warmup:
                            results[phase][name].append(elapsed * 1000)
            nursery.cancel_scope.cancel()
    finally:
        root.remove()
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "runs": runs,
        "warmup": warmup,
        "ms": {
            phase: {name: summarize(values) for name, values in rows.items() if values}
            for phase, rows in results.items()
        },
        "outputs": outputs,
    }


def markdown(data: dict[str, Any], facts: dict[str, Any]) -> str:
    lines = [
        "# Hook helper start-up (agybridge.permissions)",
        "",
        facts_markdown(facts),
        "",
        f"{data['runs']} runs per cell after {data['warmup']} warm-up runs; wall clock of "
        "`sh -c <command>` with the payload on stdin, in ms.",
        "",
        "| phase | variant | median | p90 | min | max |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for phase, rows in data["ms"].items():
        for name, stats in rows.items():
            lines.append(
                f"| {phase} | {name} | {fmt(stats['median'])} | {fmt(stats['p90'])} | "
                f"{fmt(stats['min'])} | {fmt(stats['max'])} |"
            )
    lines += ["", "Helper outputs (last run):", ""]
    lines += [f"- {key}: `{value}`" for key, value in data["outputs"].items()]
    return "\n".join(lines)


def main() -> int:
    description = (__doc__ or "").split("\n")[0]
    data = run_and_report("bench-hook", description, bench, markdown, runs=20, warmup=2)
    ok = all(
        '"decision"' in out and ("deny" in out if key.startswith("start") else "allow" in out)
        for key, out in data["outputs"].items()
        if "baseline" not in key
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
