"""Token accounting: context windows, context in use and per-turn figures (contract.md §3.5)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.agy import Usage
from agybridge.config import ConfigError, Settings
from agybridge.translate import usage

CAPTURES = Path(__file__).parents[2] / "data" / "agy-captures"

# (model as agy names it, expected window)
WINDOW_CASES = [
    ("Gemini 3.7 Flash (High)", 1_048_576),
    ("gemini-3.1-pro", 1_048_576),
    ("  GEMINI_3_5_FLASH ", 1_048_576),
    ("Claude Sonnet 4.6 (Thinking)", 1_000_000),
    ("claude-opus-4-6", 1_000_000),
    ("claude-opus-4-6-thinking", 1_000_000),
    ("claude_sonnet_4_6", 1_000_000),
    ("Claude Opus 5.5 (Medium)", 200_000),
    ("claude-sonnet-4-5", 200_000),
    ("GPT-OSS 120B (Medium)", 131_072),
    ("gpt_oss_120b", 131_072),
    ("gpt oss 120b", 131_072),
    ("Mystery Model 9", usage.DEFAULT_CONTEXT_WINDOW),
    ("", usage.DEFAULT_CONTEXT_WINDOW),
    (None, usage.DEFAULT_CONTEXT_WINDOW),
]


@pytest.mark.parametrize(("model", "window"), WINDOW_CASES)
def test_context_window_table(model: str | None, window: int) -> None:
    """Model families map to their windows whatever the spelling; unknown models get 200k."""
    assert usage.context_window(model) == window


def _captured_model_names() -> list[str]:
    """The display names agy 1.3.x listed after an unknown ``--model`` (a real capture)."""
    text = (CAPTURES / "untether-1.3.x-stderr-and-exit.txt").read_text()
    listing = text.split("Available models:\n", 1)[1].split("\nrc:", 1)[0]
    return [line.strip() for line in listing.splitlines()]


def test_every_model_agy_lists_has_a_window_and_claude_4_6_has_1m() -> None:
    """Each model a real agy offered is in the table (none falls to the 200k guess),
    and its two Claude 4.6 models count the 1,000,000-token window."""
    names = _captured_model_names()
    assert len(names) == 14 and "Claude Opus 4.6 (Thinking)" in names
    windows = {name: usage.context_window(name) for name in names}
    assert {w for n, w in windows.items() if n.startswith("Gemini")} == {1_048_576}
    assert windows["Claude Sonnet 4.6 (Thinking)"] == windows["Claude Opus 4.6 (Thinking)"]
    assert windows["Claude Opus 4.6 (Thinking)"] == 1_000_000
    assert windows["GPT-OSS 120B (Medium)"] == 131_072
    families = [family for family, _ in usage.CONTEXT_WINDOWS]
    for name in names:
        normalised = name.lower().replace(" ", "-").replace(".", "-")
        assert any(normalised.startswith(f) for f in families), name


def test_context_window_override() -> None:
    """The configured window wins over the table, also for unknown models."""
    assert usage.context_window("Gemini 3.7 Flash (High)", 500_000) == 500_000
    assert usage.context_window(None, 32768) == 32768


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("500000", 500_000),
        ("", None),
        ("0", "error"),
        ("-5", "error"),
        ("lots", "error"),
        ("1e6", "error"),
    ],
)
def test_context_window_setting(value: str, expected: int | str | None) -> None:
    """AGYBRIDGE_CONTEXT_WINDOW is validated with the other settings."""
    env = {"AGYBRIDGE_CONTEXT_WINDOW": value}
    if expected == "error":
        with pytest.raises(ConfigError, match=f"AGYBRIDGE_CONTEXT_WINDOW .*{value!r}"):
            Settings.from_env(env)
    else:
        assert Settings.from_env(env).context_window == expected


def test_context_used_counts_input_cache_and_output() -> None:
    """Context in use is input + cache_read + output (thinking is inside output)."""
    step = Usage(
        input_tokens=278,
        output_tokens=4,
        thinking_tokens=3,
        cache_read_tokens=30214,
        total_tokens=282,
    )
    assert usage.context_used(step) == 278 + 30214 + 4


def test_context_used_falls_back_to_total_tokens() -> None:
    """agy 1.2.x gives later steps only ``total_tokens``: the meter must not say 0."""
    assert usage.context_used(Usage(total_tokens=31_000)) == 31_000
    assert usage.context_used(Usage()) == 0


TURN1 = Usage(input_tokens=15575, output_tokens=20, thinking_tokens=19, total_tokens=15595)
TURN2_SUM = Usage(
    input_tokens=15575 + 278,
    output_tokens=20 + 4,
    thinking_tokens=19,
    cache_read_tokens=30214,
    total_tokens=15595 + 282,
)
STEPS = Usage(input_tokens=7, output_tokens=1, total_tokens=8)

# (description, result usage, previous result usage, expected turn usage)
TURN_CASES = [
    (
        "difference of two cumulative results",
        TURN2_SUM,
        TURN1,
        Usage(
            input_tokens=278,
            output_tokens=4,
            thinking_tokens=0,
            cache_read_tokens=30214,
            total_tokens=282,
        ),
    ),
    ("the first result of a fresh process minus zero is itself", TURN1, Usage(), TURN1),
    ("no previous result: the turn's own steps", TURN1, None, STEPS),
    ("no result usage: the turn's own steps", None, TURN1, STEPS),
    ("counters went backwards (reset): the turn's own steps", TURN1, TURN2_SUM, STEPS),
    ("one counter went backwards: the turn's own steps", Usage(input_tokens=9), TURN1, STEPS),
]


@pytest.mark.parametrize(
    ("result", "previous", "expected"), [c[1:] for c in TURN_CASES], ids=[c[0] for c in TURN_CASES]
)
def test_turn_usage(result: Usage | None, previous: Usage | None, expected: Usage) -> None:
    """A turn's figures come from the result difference, else from its own steps."""
    assert usage.turn_usage(result, previous, STEPS) == expected


def test_total_and_meta() -> None:
    """Step usages add up field by field; the meta uses camelCase names."""
    summed = usage.total([TURN1, STEPS, Usage(cache_read_tokens=5)])
    assert summed == Usage(
        input_tokens=15582,
        output_tokens=21,
        thinking_tokens=19,
        cache_read_tokens=5,
        total_tokens=15603,
    )
    assert usage.total([]) == Usage()
    assert usage.to_meta(summed) == {
        "inputTokens": 15582,
        "outputTokens": 21,
        "thinkingTokens": 19,
        "cacheReadTokens": 5,
        "totalTokens": 15603,
    }


_count = st.integers(min_value=0, max_value=10**9)
_usages = st.builds(
    Usage,
    input_tokens=_count,
    output_tokens=_count,
    thinking_tokens=_count,
    cache_read_tokens=_count,
    total_tokens=_count,
)


@given(a=_usages, b=_usages)
def test_add_then_subtract_round_trips(a: Usage, b: Usage) -> None:
    """Subtracting what was added gives back the original, in either order."""
    assert usage.subtract(usage.add(a, b), b) == a
    assert usage.subtract(usage.add(a, b), a) == b
    assert usage.add(a, b) == usage.add(b, a)


@given(a=_usages, b=_usages)
def test_subtract_is_field_by_field(a: Usage, b: Usage) -> None:
    """``a - b`` is every counter's difference, when none is negative."""
    differences = {
        field.name: getattr(a, field.name) - getattr(b, field.name) for field in attrs.fields(Usage)
    }
    expected = None if min(differences.values()) < 0 else Usage(**differences)
    assert usage.subtract(a, b) == expected


@given(a=_usages, b=_usages)
def test_subtract_refuses_a_larger_counter(a: Usage, b: Usage) -> None:
    """``a - b`` is None exactly when some counter of ``b`` exceeds ``a``'s."""
    fields = (
        "input_tokens",
        "output_tokens",
        "thinking_tokens",
        "cache_read_tokens",
        "total_tokens",
    )
    larger = any(getattr(b, f) > getattr(a, f) for f in fields)
    assert (usage.subtract(a, b) is None) == larger
