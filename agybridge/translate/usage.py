"""Token accounting (pure): context in use, per-turn figures, context windows.

agy reports ``usage`` per finished model step and a running sum on every
``result`` (cumulative per process; contract.md §3.5, §8.5). So:

* context in use now = the latest model step's ``input + cache_read + output``
  (``cache_read_tokens`` is reported separately from ``input_tokens``;
  checkpoint steps are agy's own side calls and do not change the context),
  or its ``total_tokens`` when a step carries only that;
* a turn's figures = this result minus the previous result of the same
  process (zero for a fresh process); for the first turn of a resumed process
  (``--conversation``, where some agy versions carry older turns in the sum)
  the sum of the turn's own step usages is used instead, so nothing is ever
  counted twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..agy import Usage

DEFAULT_CONTEXT_WINDOW = 200_000

#: The one table of context windows, by model family (agy's slug or display
#: name, matched by prefix after normalising: ``Claude Sonnet 4.6 (Thinking)``
#: and ``claude-sonnet-4-6`` are the same row; the first matching row wins, so
#: a model's own row comes before its family's). agy names a model (``init.model``,
#: ``agy models``) but never says its window (contract.md §3.1, §6), so this table
#: is the only source; the AGYBRIDGE_CONTEXT_WINDOW setting overrides it.
#: Claude 4.6: 1,000,000 since Anthropic's 1M window went GA (2026-03-13), as
#: agy-acp-map also counts it ("verified 2026-09"); other Claude models 200,000.
CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gemini", 1_048_576),
    ("claude-sonnet-4-6", 1_000_000),
    ("claude-opus-4-6", 1_000_000),
    ("claude", 200_000),
    ("gpt-oss", 131_072),
)


def context_window(model: str | None, override: int | None = None) -> int:
    """The context window for ``model`` (``override`` wins: the
    AGYBRIDGE_CONTEXT_WINDOW setting); unknown models get 200k tokens."""
    if override is not None:
        return override
    if model:
        # Spaces, underscores and dots all become "-": "Claude Opus 4.6" is claude-opus-4-6.
        normalised = re.sub(r"[\s_.]+", "-", model.strip().lower())
        for family, size in CONTEXT_WINDOWS:
            if normalised.startswith(family):
                return size
    return DEFAULT_CONTEXT_WINDOW


def context_used(usage: Usage) -> int:
    """Tokens the step leaves in the context. Some agy versions (1.2.x) give
    later steps only ``total_tokens``: then that is the best figure there is."""
    parts = usage.input_tokens + usage.cache_read_tokens + usage.output_tokens
    return parts if parts > 0 else usage.total_tokens


def add(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        thinking_tokens=a.thinking_tokens + b.thinking_tokens,
        cache_read_tokens=a.cache_read_tokens + b.cache_read_tokens,
        total_tokens=a.total_tokens + b.total_tokens,
    )


def subtract(a: Usage, b: Usage) -> Usage | None:
    """``a - b``, or None when ``b`` is not a prefix of ``a`` (counters reset)."""
    values = (
        a.input_tokens - b.input_tokens,
        a.output_tokens - b.output_tokens,
        a.thinking_tokens - b.thinking_tokens,
        a.cache_read_tokens - b.cache_read_tokens,
        a.total_tokens - b.total_tokens,
    )
    if min(values) < 0:
        return None
    return Usage(*values)  # the fields in that order


def total(usages: Iterable[Usage]) -> Usage:
    result = Usage()
    for usage in usages:
        result = add(result, usage)
    return result


def turn_usage(result: Usage | None, previous: Usage | None, steps: Usage) -> Usage:
    """This turn's figures (see the module docstring)."""
    if result is not None and previous is not None:
        difference = subtract(result, previous)
        if difference is not None:
            return difference
    return steps


def to_meta(usage: Usage) -> dict[str, int]:
    return {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "thinkingTokens": usage.thinking_tokens,
        "cacheReadTokens": usage.cache_read_tokens,
        "totalTokens": usage.total_tokens,
    }
