"""Unusable text in a request: the quick pass that clears most requests never
hides what the full walk finds, and the codec's plain-prompt shortcut builds
what the converter builds."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agybridge.acp import codec, models, text_check

# Every code point: lone surrogates and NUL included.
_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=6)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=10,
)


def _full_walk(value: Any) -> tuple[str, str] | None:
    return text_check._walk(value, "$", lambda p: text_check.FREE_TEXT.match(p) is not None)


@given(
    value=_JSON
    | st.fixed_dictionaries({"prompt": st.lists(st.fixed_dictionaries({"text": _TEXT}))})
)
def test_the_quick_pass_agrees_with_the_full_walk(value: Any) -> None:
    assert text_check.find_bad_text(value) == _full_walk(value)


_BLOCK = st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}) | st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image"]) | _JSON},
    optional={"text": _JSON, "annotations": _JSON, "_meta": _JSON, "data": _JSON},
)


@given(
    request=st.fixed_dictionaries(
        {"sessionId": _TEXT | _JSON, "prompt": st.lists(_BLOCK, max_size=3) | _JSON},
        optional={"_meta": _JSON, "extra": _JSON},
    )
    | _JSON
)
def test_the_plain_prompt_shortcut_builds_what_the_converter_builds(request: Any) -> None:
    fast = codec.structure_plain_prompt(request)
    if fast is not None:
        assert fast == codec.structure(request, models.PromptRequest)


def test_a_plain_prompt_takes_the_shortcut() -> None:
    request = {"sessionId": "s", "prompt": [{"type": "text", "text": "hé"}]}
    assert codec.structure_plain_prompt(request) == models.PromptRequest(
        session_id="s", prompt=[models.TextContent(text="hé")]
    )


def test_a_deeply_nested_request_is_checked_as_deep_as_the_full_walk_goes() -> None:
    """The quick pass costs no more stack per level than the walk: a value
    nested 600 deep (json parses it) gets its answer, not a RecursionError."""
    depth = 600
    value = json.loads('{"_meta":' + "[" * depth + '"\\ud800"' + "]" * depth + "}")
    assert text_check.find_bad_text(value) == _full_walk(value)
    assert text_check.find_bad_text(json.loads("[" * depth + '"ok"' + "]" * depth)) is None
