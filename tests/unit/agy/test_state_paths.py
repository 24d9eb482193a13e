"""Where agy keeps a conversation's files (agy/state.py)."""

from __future__ import annotations

import pytest

from agybridge.agy.state import brain_root, conversation_folder, state_root


def test_paths_below_home() -> None:
    assert state_root("/home/u") == "/home/u/.gemini/antigravity-cli"
    assert brain_root("/home/u") == "/home/u/.gemini/antigravity-cli/brain"
    assert conversation_folder("5bcf649b-0dfc", "/home/u") == (
        "/home/u/.gemini/antigravity-cli/brain/5bcf649b-0dfc"
    )


def test_home_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/h")
    assert conversation_folder("c1") == "/h/.gemini/antigravity-cli/brain/c1"
    monkeypatch.delenv("HOME")
    assert conversation_folder("c1") is None


@pytest.mark.parametrize("conversation", [None, "", "..", ".", "a/b", "../x", ".hidden"])
def test_no_folder_for_ids_that_name_another_folder(conversation: str | None) -> None:
    assert conversation_folder(conversation, "/home/u") is None
    assert state_root("relative/home") is None
