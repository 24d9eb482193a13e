"""StreamedText and LineScan: bounded memory, same answers as keeping everything."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agybridge.translate import streamed
from agybridge.translate.images import image_candidates
from agybridge.translate.streamed import LineScan, StreamedText

_DELTAS = st.lists(st.text(max_size=12), max_size=40)


@given(
    deltas=_DELTAS, extra=st.text(max_size=10), other=st.text(max_size=60), extends=st.booleans()
)
def test_rest_of_and_text_agree_with_the_whole_text(
    deltas: list[str], extra: str, other: str, extends: bool
) -> None:
    whole = "".join(deltas)
    response = whole + extra if extends else other
    text = StreamedText(keep_chars=32)  # small, so that generated turns cross it
    for delta in deltas:
        text.add_delta(delta)
    expected_rest = response[len(whole) :] if response.startswith(whole) else None
    assert text.rest_of(response) == expected_rest
    assert text.delta_chars == len(whole)
    assert text.visible == bool(whole.strip())
    if expected_rest is not None or not text.truncated:
        assert text.text == whole
    else:
        # Not restated and not kept: the head and tail with the middle elided.
        kept = text.text
        assert kept.startswith(whole[:1]) and kept.endswith(whole[-1:])
        assert "characters not kept" in kept
    for size in (1, 2, 5):
        assert text.last_chars(size) == whole[-size:], "the end shown, however much was shed"
    text.add_after("")
    text.add_after(extra)
    assert text.last_chars(2) == (whole + extra)[-2:]
    text.add_after("after")
    assert text.text.endswith("after") and text.visible


def test_memory_stays_bounded() -> None:
    text = StreamedText(keep_chars=64)
    for n in range(10_000):
        text.add_delta(f"w{n} ")
    assert text._head_chars + text._tail_chars <= 2 * 64
    assert text.truncated and len(text._head) + len(text._tail) <= 64
    whole = "".join(f"w{n} " for n in range(10_000))
    assert text.rest_of(whole + "!") == "!"
    assert text.text == whole


_PATHY = st.lists(
    st.sampled_from(["a", "b.png", "/x/y.jpg", " ", "\n", "'", '"', "`", ".", "/", "c d.gif", "é"]),
    max_size=60,
)


@given(parts=_PATHY, cuts=st.lists(st.integers(0, 200), max_size=10), more=st.text(max_size=5))
def test_line_scan_finds_what_a_whole_text_scan_finds(
    parts: list[str], cuts: list[int], more: str
) -> None:
    whole = "".join(parts)
    scan = LineScan("/w", line_chars=10**9)  # no trimming here
    start = 0
    for cut in [*sorted(cuts), len(whole)]:
        end = min(max(cut, start), len(whole))
        scan.add(whole[start:end])
        start = end
    assert scan.candidates(more) == image_candidates(whole + more, "/w")


def test_line_scan_keeps_only_a_bounded_unfinished_line() -> None:
    """One endless line (agy's deltas without a newline): paths early in it are
    still found, and what is kept stays bounded."""
    scan = LineScan("/w")
    scan.add("see /w/first.png ")
    for n in range(5000):
        scan.add(f"word{n} ")
    scan.add("and /w/last.png")
    assert scan._line_chars <= streamed.SCAN_LINE_CHARS + 20
    assert scan.candidates() == ["/w/first.png", "/w/last.png"]
