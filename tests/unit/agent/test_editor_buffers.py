"""Unsaved editor buffers (agent/editor_buffers.py): which links are read, what agy is
told, and that a client without fs.readTextFile is never asked."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

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
