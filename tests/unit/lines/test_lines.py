"""LineBuffer: table cases fed whole, byte by byte and in arbitrary chunks."""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.lines import DEFAULT_MAX_LINE_BYTES, LineBuffer, LineTooLongError

TOO_LONG = "<line too long>"  # stands for one LineTooLongError in an expected output

Event = bytes | str


def drain(buf: LineBuffer) -> list[Event]:
    events: list[Event] = []
    while True:
        try:
            line = buf.next_line()
        except LineTooLongError:
            events.append(TOO_LONG)
            continue
        if line is None:
            return events
        events.append(line)


def run(chunks: Iterable[bytes], limit: int, *, eof: bool = True) -> list[Event]:
    buf = LineBuffer(limit)
    events: list[Event] = []
    for chunk in chunks:
        buf.feed(chunk)
        events += drain(buf)
    if eof:
        buf.feed_eof()
        events += drain(buf)
        assert buf.next_line() is None  # EOF is final
    return events


def split_every(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


# (name, limit, input, expected events once EOF is fed)
CASES: list[tuple[str, int, bytes, list[Event]]] = [
    ("empty stream", 10, b"", []),
    ("one line", 10, b"hello\n", [b"hello"]),
    ("two lines", 10, b"a\nbc\n", [b"a", b"bc"]),
    ("empty lines are lines", 10, b"\n\na\n", [b"", b"", b"a"]),
    ("CRLF", 10, b"a\r\nb\r\n", [b"a", b"b"]),
    ("only one CR is stripped", 10, b"a\r\r\n", [b"a\r"]),
    ("a lone CR is data", 10, b"a\rb\n", [b"a\rb"]),
    ("unterminated final line", 10, b"a\nlast", [b"a", b"last"]),
    ("unterminated final line with CR", 10, b"last\r", [b"last"]),
    ("no phantom line after final newline", 10, b"a\n", [b"a"]),
    ("line of exactly the limit", 4, b"abcd\nx\n", [b"abcd", b"x"]),
    ("limit + 1 is too long", 4, b"abcde\nx\n", [TOO_LONG, b"x"]),
    ("the CR counts towards the limit", 4, b"abcd\r\nx\n", [TOO_LONG, b"x"]),
    ("skip then continue", 4, b"ok\n" + b"x" * 50 + b"\nnext\n", [b"ok", TOO_LONG, b"next"]),
    (
        "two oversized lines in a row",
        4,
        b"x" * 9 + b"\n" + b"y" * 9 + b"\nz\n",
        [TOO_LONG, TOO_LONG, b"z"],
    ),
    ("oversized unterminated at EOF", 4, b"a\n" + b"x" * 9, [b"a", TOO_LONG]),
    ("binary bytes pass through", 10, b"\x00\xff\xfe\n", [b"\x00\xff\xfe"]),
]


@pytest.mark.parametrize(
    ("limit", "data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_whole(limit: int, data: bytes, expected: list[Event]) -> None:
    """A stream fed in one piece yields the expected lines."""
    assert run([data], limit) == expected


@pytest.mark.parametrize(
    ("limit", "data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_byte_by_byte(limit: int, data: bytes, expected: list[Event]) -> None:
    """A stream fed one byte at a time yields the same lines."""
    assert run(split_every(data, 1), limit) == expected


@pytest.mark.parametrize(
    ("limit", "data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_without_eof_holds_back_the_partial_line(
    limit: int, data: bytes, expected: list[Event]
) -> None:
    """Before EOF, only newline-terminated lines come out (oversized ones still report)."""
    complete = data[: data.rfind(b"\n") + 1]
    tail = data[len(complete) :]
    events = run(split_every(data, 1), limit, eof=False)
    assert events == run([complete], limit) + ([TOO_LONG] if len(tail) > limit else [])


def test_nothing_until_newline() -> None:
    """next_line() returns None while a line is incomplete, then the whole line."""
    buf = LineBuffer(100)
    buf.feed(b"par")
    assert buf.next_line() is None
    buf.feed(b"tial")
    assert buf.next_line() is None
    assert not buf.at_eof
    buf.feed(b"\nnext")
    assert buf.next_line() == b"partial"
    assert buf.next_line() is None
    buf.feed_eof()
    assert buf.at_eof
    assert buf.next_line() == b"next"
    assert buf.next_line() is None


def test_error_attributes_and_message() -> None:
    """LineTooLongError says what happened and the limit in MiB."""
    buf = LineBuffer(2 * 2**20)
    buf.feed(b"x" * (2 * 2**20 + 5))
    with pytest.raises(LineTooLongError) as info:
        buf.next_line()
    assert info.value.limit == 2 * 2**20
    assert info.value.size == 2 * 2**20 + 5
    assert "2 MiB" in str(info.value)
    assert "too long" in str(info.value)


def test_error_raised_once_per_line() -> None:
    """An oversized line reports once, however many chunks of it arrive afterwards."""
    buf = LineBuffer(4)
    buf.feed(b"xxxxxx")
    with pytest.raises(LineTooLongError):
        buf.next_line()
    for _ in range(10):
        buf.feed(b"yyyyyyyy")
        assert buf.next_line() is None
    buf.feed(b"yy\nok\n")
    assert buf.next_line() == b"ok"


def test_feed_after_eof_is_an_error() -> None:
    """Data after feed_eof() is a caller bug."""
    buf = LineBuffer(4)
    buf.feed_eof()
    buf.feed(b"")
    with pytest.raises(RuntimeError, match="after feed_eof"):
        buf.feed(b"x")


def test_invalid_limit() -> None:
    """A limit below one byte is refused."""
    with pytest.raises(ValueError, match="max_line_bytes"):
        LineBuffer(0)


class CountingBuffer(bytearray):
    """A LineBuffer's buffer that counts the bytes its searches for b"\\n" look at."""

    searched = 0

    def find(self, sub: object, start: int = 0, *args: int) -> int:  # type: ignore[override]
        self.searched += len(self) - start
        return super().find(sub, start, *args)  # type: ignore[arg-type]

    def rfind(self, sub: object, start: int = 0, *args: int) -> int:  # type: ignore[override]
        self.searched += len(self) - start
        return super().rfind(sub, start, *args)  # type: ignore[arg-type]


@pytest.mark.parametrize("drained", [False, True], ids=["next_line", "drain"])
def test_a_growing_line_is_searched_once_not_once_per_chunk(drained: bool) -> None:
    """A 1 MiB line (between two short ones) in 1 KiB chunks: the bytes
    searched stay linear in the input; searching the partial line again from
    its start per chunk would look at ~512 MiB."""
    line = bytes(range(256)).replace(b"\n", b"") * (2**20 // 255)
    data = b"small\n" + line + b"\nafter\n"
    framer = LineBuffer(DEFAULT_MAX_LINE_BYTES)
    counted = framer._buf = CountingBuffer()
    events: list[Event] = []
    for chunk in split_every(data, 2**10):
        framer.feed(chunk)
        events += framer.drain() if drained else drain(framer)  # type: ignore[arg-type]
    assert events == [b"small", line, b"after"]
    assert counted.searched <= 2 * len(data)


def test_oversized_line_is_never_buffered() -> None:
    """Skipping a 32 MiB line under a 1 MiB limit keeps memory O(limit)."""
    buf = LineBuffer(2**20)
    chunk = b"x" * 2**16
    tracemalloc.start()
    try:
        errors = 0
        for _ in range(512):
            buf.feed(chunk)
            try:
                assert buf.next_line() is None
            except LineTooLongError:
                errors += 1
        buf.feed(b"\nafter\n")
        assert buf.next_line() == b"after"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert errors == 1
    assert peak < 4 * 2**20


# -- properties


def expected_events(lines: list[bytes], limit: int) -> list[Event]:
    """The model: one event per line, CR stripped, TOO_LONG over the limit."""
    return [TOO_LONG if len(line) > limit else line.removesuffix(b"\r") for line in lines]


line_bytes = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))
crlf_lines = st.one_of(line_bytes, line_bytes.map(lambda b: b + b"\r"))


@st.composite
def chunked(draw: st.DrawFn, data: bytes) -> list[bytes]:
    cuts = sorted(draw(st.sets(st.integers(0, len(data)), max_size=len(data) + 1)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@given(
    lines=st.lists(crlf_lines, max_size=20),
    terminated=st.booleans(),
    limit=st.integers(1, 30),
    data=st.data(),
)
def test_any_chunking_yields_the_same_lines(
    lines: list[bytes], terminated: bool, limit: int, data: st.DataObject
) -> None:
    """However a stream is cut into chunks, the lines (and errors) are the same."""
    stream = b"\n".join(lines) + (b"\n" if terminated and lines else b"")
    expected = expected_events(lines, limit)
    if lines and not terminated and not lines[-1]:
        expected.pop()  # an empty unterminated tail is not a line
    chunks = data.draw(chunked(stream))
    assert b"".join(chunks) == stream
    assert run(chunks, limit) == expected
    assert run([stream], limit) == expected


def run_drained(
    chunks: Iterable[bytes], limit: int, *, eof: bool = True, at_once: bool = False
) -> list[Event]:
    """`run`, with `LineBuffer.drain` instead of one `next_line` per line
    (``at_once``: each chunk through `LineBuffer.feed_and_drain`)."""
    buf = LineBuffer(limit)
    events: list[Event] = []

    def take(out: Iterable[bytes | LineTooLongError]) -> None:
        for line in out:
            assert isinstance(line, LineTooLongError) or type(line) is bytes
            events.append(TOO_LONG if isinstance(line, LineTooLongError) else line)

    for chunk in chunks:
        if at_once:
            take(buf.feed_and_drain(chunk))
        else:
            buf.feed(chunk)
            take(buf.drain())
    if eof:
        buf.feed_eof()
        take(buf.drain())
        assert buf.drain() == []
    return events


@given(
    lines=st.lists(crlf_lines, max_size=20),
    terminated=st.booleans(),
    eof=st.booleans(),
    limit=st.integers(1, 30),
    data=st.data(),
)
def test_drain_gives_what_next_line_gives(
    lines: list[bytes], terminated: bool, eof: bool, limit: int, data: st.DataObject
) -> None:
    """The bulk split and the line-at-a-time framer agree on every chunking,
    over-long lines (their errors, and the bytes skipped after them) included;
    so does the split of a read as it is (`LineBuffer.feed_and_drain`)."""
    stream = b"\n".join(lines) + (b"\n" if terminated and lines else b"")
    chunks = data.draw(chunked(stream))
    expected = run(chunks, limit, eof=eof)
    assert run_drained(chunks, limit, eof=eof) == expected
    assert run_drained(chunks, limit, eof=eof, at_once=True) == expected


def test_drain_error_carries_the_line_size() -> None:
    buf = LineBuffer(5)  # a CR counts: "fine\r" just fits
    buf.feed(b"ok\n123456\r\nfine\r\n123456")
    out = buf.drain()
    assert out[0] == b"ok" and out[2] == b"fine" and len(out) == 4
    assert isinstance(out[1], LineTooLongError) and out[1].size == 7
    assert isinstance(out[3], LineTooLongError) and out[3].size == 6
    buf.feed(b"67\nnext\n")
    assert buf.drain() == [b"next"]  # the over-long line's rest was skipped


def test_feed_and_drain_of_whole_lines() -> None:
    buf = LineBuffer(10)
    assert list(buf.feed_and_drain(b"a\n\nbc\n")) == [b"a", b"", b"bc"]
    assert list(buf.feed_and_drain(bytearray(b"d\n"))) == [b"d"]
    assert list(buf.feed_and_drain(b"x" * 11 + b"\ny\n"))[1:] == [b"y"]
    assert list(buf.feed_and_drain(b"e\r\n")) == [b"e"]
    assert list(buf.feed_and_drain(b"part")) == []
    assert list(buf.feed_and_drain(b"ial\n")) == [b"partial"]
