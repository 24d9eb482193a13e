"""Prompt routing (agent/prompting.py): which prompts can be commands."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agybridge.acp import models
from agybridge.acp.content import PromptContentError, convert_text_prompt
from agybridge.agent import prompting
from agybridge.session.commands import BRIDGE_COMMANDS
from agybridge.workspace.skills import Skill

_texts = st.one_of(
    st.text(),
    st.builds(
        "".join,
        st.lists(
            st.sampled_from([" ", "\t", "\n", "\u2003", "/", "x", "model", "my-skill", ".", "é"])
        ),
    ),
    st.sampled_from([f"/{name}" for name in BRIDGE_COMMANDS] + ["  /my-skill go", "/my-skill"]),
)


@given(texts=st.lists(_texts, max_size=2))
def test_only_a_slash_text_can_be_a_command(texts: list[str]) -> None:
    """``session/prompt`` parses a command only when ``slash_text`` holds:
    ``command_of`` finds none in any other prompt."""
    blocks: list[Any] = [models.TextContent(text=text) for text in texts]
    skill = Skill(name="my-skill", path="/w/.agents/skills/my-skill/SKILL.md", description="")
    session: Any = SimpleNamespace(skills=[skill])
    if not prompting.slash_text(blocks):
        assert prompting.command_of(blocks, session) is None


@given(texts=st.lists(st.text(), max_size=3))
def test_a_text_prompt_is_shown_as_agy_gets_it(texts: list[str]) -> None:
    """``prepare`` shows a text-only prompt as the text it converts to: the
    same as ``display_text``."""
    blocks: list[Any] = [models.TextContent(text=text) for text in texts]
    try:
        converted = convert_text_prompt(blocks)
    except PromptContentError:
        return  # an empty prompt: refused, never shown
    assert converted.text == prompting.display_text(blocks)
