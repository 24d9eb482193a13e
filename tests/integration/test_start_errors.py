"""What a user reads when a session cannot start (raw wire, official schema).

One row per setup problem a new user meets first: agy not installed, AGY_BIN
pointing at nothing, at a folder, at a file that is not executable, at a
program that fails at once, and a staging directory that cannot be used.
Each ``session/new`` is answered with an error that names AGY_BIN or the path
and says what to do, with the code and ``_meta.agybridge.cause`` of its
catalogue row (`agybridge.causes`) — never the -32603 "Internal error" of a
bug — and leaves no process behind; the bridge goes on answering.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from agybridge import causes
from tests.acp_wire import Harness, open_bridge, wait_no_leftovers

pytestmark = pytest.mark.integration

TEST_TIMEOUT_S = 30


#: Each row's catalogue id (``data._meta.agybridge.cause``).
CAUSES = {
    "agy not installed": "agy_not_found",
    "AGY_BIN missing": "agy_not_found",
    "AGY_BIN a directory": "agy_is_directory",
    "AGY_BIN not executable": "agy_not_executable",
    "agy exits at once": "agy_fails",
    "staging unusable": "staging_unusable",
}


def _unset(tmp: Path, env: dict[str, str]) -> list[str]:
    env.pop("AGY_BIN")
    env["PATH"] = str(tmp / "empty-bin")  # no agy anywhere on it
    return ["agy is not on PATH", "AGY_BIN is not set", "install agy"]


def _missing(tmp: Path, env: dict[str, str]) -> list[str]:
    env["AGY_BIN"] = str(tmp / "no-such" / "agy")
    return [f"AGY_BIN={env['AGY_BIN']} does not exist", "command -v agy"]


def _directory(tmp: Path, env: dict[str, str]) -> list[str]:
    folder = tmp / "agy-folder"
    folder.mkdir()
    env["AGY_BIN"] = str(folder)
    return [f"AGY_BIN={folder} is a directory", "the agy program itself"]


def _not_executable(tmp: Path, env: dict[str, str]) -> list[str]:
    program = tmp / "agy-not-executable"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o644)
    env["AGY_BIN"] = str(program)
    return [f"AGY_BIN={program} is not executable", f"chmod +x {program}"]


def _exits_at_once(tmp: Path, env: dict[str, str]) -> list[str]:
    program = tmp / "agy-broken"
    program.write_text("#!/bin/sh\necho 'agy: installation is corrupt' >&2\nexit 1\n")
    program.chmod(0o755)
    env["AGY_BIN"] = str(program)
    return [
        f"agy (AGY_BIN={program}) does not run",
        "exited with code 1",
        "installation is corrupt",
        "set AGY_BIN to a working agy",
    ]


def _staging_unusable(tmp: Path, env: dict[str, str]) -> list[str]:
    not_a_folder = tmp / "staging-is-a-file"
    not_a_folder.write_text("")
    env["AGYBRIDGE_STAGING_DIR"] = str(not_a_folder)
    return [
        f"private directory could not be made under {str(not_a_folder)!r}",
        "not a directory",
        "AGYBRIDGE_STAGING_DIR",
    ]


ROWS: dict[str, Callable[[Path, dict[str, str]], list[str]]] = {
    "agy not installed": _unset,
    "AGY_BIN missing": _missing,
    "AGY_BIN a directory": _directory,
    "AGY_BIN not executable": _not_executable,
    "agy exits at once": _exits_at_once,
    "staging unusable": _staging_unusable,
}


@pytest.mark.parametrize("row", sorted(ROWS))
async def test_session_new_says_what_is_wrong_and_what_to_do(
    harness: Harness, tmp_path: Path, row: str
) -> None:
    env = harness.env()
    expected = ROWS[row](tmp_path, env)
    with trio.fail_after(TEST_TIMEOUT_S):
        async with open_bridge(tmp_path, env) as client:
            await client.initialize()
            answer = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            assert "error" in answer, answer
            error = answer["error"]
            message = error["message"]
            assert error["code"] == causes.cause(CAUSES[row]).code != -32603, error
            assert "ExceptionGroup" not in str(error), error
            for words in expected:
                assert words in message, f"{words!r} not in {message!r}"
            # What Zed shows of an error is data.details: the same words.
            assert error["data"]["details"] == message
            meta = error["data"]["_meta"]["agybridge"]
            assert meta["cause"] == CAUSES[row]
            assert {"agyBin", "path"} & meta.keys(), meta  # what it is about
            # The bridge goes on: the same request is answered the same way.
            again = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            assert again["error"]["message"] == message
            problems = client.validator.problems
            assert not problems, client.validator.report()
    assert await wait_no_leftovers(harness.marker) == []
    staging = tmp_path / "staging"
    assert not staging.is_dir() or not any(staging.iterdir()), "a private directory was left"
