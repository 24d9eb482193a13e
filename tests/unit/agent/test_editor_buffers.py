"""Unsaved editor buffers (agent/editor_buffers.py): which links are read, what agy is
told, and that a client without fs.readTextFile is never asked."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio

from agybridge.acp import models
from agybridge.agent import editor_buffers
from agybridge.session import Session


def link(uri: str) -> models.ResourceLink:
    return models.ResourceLink(uri=uri, name="f")


def test_only_local_absolute_file_links_are_read() -> None:
    blocks: list[models.ContentBlock] = [
        models.TextContent(text="/etc/passwd"),
        link("file:///home/u/a%20b.py"),
        link("file://localhost/home/u/c.py"),
        link("file:///home/u/a%20b.py"),  # once
        link("file://server/share/d.py"),  # another host
        link("https://x.test/e.py"),
        link("file:relative.py"),
    ]
    assert editor_buffers.linked_files(blocks) == ["/home/u/a b.py", "/home/u/c.py"]


def test_a_huge_buffer_is_named_not_included() -> None:
    text = "x" * (editor_buffers.MAX_BUFFER_CHARS + 1)
    told = editor_buffers.describe_unsaved("/p/big.txt", text)
    assert told.startswith("[Unsaved changes in the editor: /p/big.txt]\nThe editor holds ")
    assert "x" * 100 not in told


@pytest.mark.parametrize("reads", [False, True])
async def test_the_client_is_asked_only_when_it_reads_files(tmp_path: Path, reads: bool) -> None:
    path = tmp_path / "a.py"
    path.write_text("old\n")
    sent: list[tuple[str, Any]] = []

    async def ask_question(session_id: str, phrase: Any) -> tuple[str, Any] | None:
        capabilities = models.ClientCapabilities(
            fs=models.FileSystemCapabilities(read_text_file=reads)
        )
        asked = phrase(capabilities)
        if asked is None:
            return None
        sent.append(asked)
        return asked[0], {"content": "new\n"}

    session = SimpleNamespace(session_id="s", deps=SimpleNamespace(ask_question=ask_question))
    parts = await editor_buffers.unsaved_buffers(cast(Session, session), [link(path.as_uri())])
    if reads:
        assert sent == [("fs/read_text_file", {"sessionId": "s", "path": str(path)})]
        assert parts == [editor_buffers.describe_unsaved(str(path), "new\n")]
    else:
        assert sent == [] and parts == []


async def test_a_silent_client_delays_the_prompt_once_not_once_per_file(
    tmp_path: Path, autojump_clock: Any
) -> None:
    """Five links to a client that never answers: the prompt waits BUFFER_WAIT_S in all,
    and the one file it did answer for still goes to agy."""
    paths = [tmp_path / f"{n}.py" for n in range(5)]
    for path in paths:
        path.write_text("old\n")

    async def ask_question(session_id: str, phrase: Any) -> tuple[str, Any] | None:
        asked = phrase(
            models.ClientCapabilities(fs=models.FileSystemCapabilities(read_text_file=True))
        )
        if asked[1]["path"] == str(paths[2]):
            return asked[0], {"content": "new\n"}
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    session = SimpleNamespace(session_id="s", deps=SimpleNamespace(ask_question=ask_question))
    started = trio.current_time()
    blocks: list[models.ContentBlock] = [link(path.as_uri()) for path in paths]
    parts = await editor_buffers.unsaved_buffers(cast(Session, session), blocks)
    assert trio.current_time() - started == pytest.approx(editor_buffers.BUFFER_WAIT_S)
    assert parts == [editor_buffers.describe_unsaved(str(paths[2]), "new\n")]
