"""Images named in agy's output: finding, sniffing and safely reading them."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
import trio

from agybridge.agy.events import StepUpdate, StepUpdateEvent, ToolInfo
from agybridge.media import sniff_image_type
from agybridge.translate.images import MAX_CANDIDATES, image_candidates
from agybridge.translate.observation import ImageData
from agybridge.workspace.reads import (
    MAX_DIFF_FILE_BYTES,
    MAX_INLINE_IMAGE_BYTES,
    ImageScope,
    observe,
    read_image,
    read_text_file,
    snapshot_edit_target,
)

CWD = "/home/user/project"

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 20
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 20
GIF87 = b"GIF87a" + b"\x01\x00\x01\x00" + b"\x00" * 10
GIF89 = b"GIF89a" + b"\x01\x00\x01\x00" + b"\x00" * 10
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 20

# (description, text, expected candidates)
CANDIDATE_CASES = [
    ("absolute path", "wrote /tmp/x/plot.png", ["/tmp/x/plot.png"]),
    ("relative path joined with cwd", "saved out/plot.PNG.", [f"{CWD}/out/plot.PNG"]),
    ("dot-slash and a list", "see ./a.jpg, b.jpeg", [f"{CWD}/a.jpg", f"{CWD}/b.jpeg"]),
    ("double-quoted with spaces", 'saved "my shots/a b.png"', [f"{CWD}/my shots/a b.png"]),
    ("backticked with spaces", "saved `my shots/c d.webp`", [f"{CWD}/my shots/c d.webp"]),
    ("single-quoted", "opened 'x.gif'", [f"{CWD}/x.gif"]),
    ("in parentheses", "(plot.png)", [f"{CWD}/plot.png"]),
    ("non-ASCII name", "emoji-🐍.png", [f"{CWD}/emoji-🐍.png"]),
    ("https URL ignored", "https://example.com/a.png", []),
    ("quoted URL ignored", "'https://example.com/a b.png'", []),
    ("file URL ignored", "file:///tmp/a.png", []),
    ("URL ignored, plain name after it kept", "http://x/y.gif and z.gif", [f"{CWD}/z.gif"]),
    ("parent segment refused", "../secret.png", []),
    ("parent segment in the middle refused", "a/../../b.png", []),
    ("quoted parent segment refused", '"sub dir/../../etc/x.png"', []),
    ("home-relative refused", "~/pic.png", []),
    ("duplicates once", "a.png and a.png and ./a.png", [f"{CWD}/a.png"]),
    ("not an image extension", "notes.txt and a.pngx", []),
    ("normalised", "/tmp/./x//y.png", ["/tmp/x/y.png"]),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in CANDIDATE_CASES], ids=[c[0] for c in CANDIDATE_CASES]
)
def test_image_candidates(text: str, expected: list[str]) -> None:
    """Image paths in text become absolute candidates; URLs and escapes are skipped."""
    assert image_candidates(text, CWD) == expected


def test_image_candidates_are_capped() -> None:
    """A listing of many images yields at most MAX_CANDIDATES, in order of appearance."""
    text = " ".join(f"i{n}.png" for n in range(MAX_CANDIDATES + 12))
    assert image_candidates(text, CWD) == [f"{CWD}/i{n}.png" for n in range(MAX_CANDIDATES)]


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (GIF87, "image/gif"),
        (GIF89, "image/gif"),
        (WEBP, "image/webp"),
        (b"RIFF\x24\x00\x00\x00WAVEfmt ", None),
        (b"RIFF\x00\x00", None),
        (b"\x89PNG", None),
        (b"\xff\xd8", None),
        (b"BM\x00\x00", None),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", None),
        (b"hello world", None),
        (b"", None),
    ],
)
def test_sniff_image_type(data: bytes, mime: str | None) -> None:
    """Magic bytes decide the type: PNG, JPEG, GIF and WebP, nothing else."""
    assert sniff_image_type(data) == mime


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def image(data: bytes) -> ImageData:
    mime = sniff_image_type(data)
    assert mime is not None
    return ImageData(mime_type=mime, data=base64.b64encode(data).decode("ascii"))


def test_read_image_inside_roots(root: Path) -> None:
    """An image inside a root comes back as base64 with the type its bytes prove."""
    (root / "a.png").write_bytes(PNG)
    (root / "photo.png").write_bytes(JPEG)  # misnamed: the bytes decide
    (root / "anim.webp").write_bytes(GIF89)
    assert read_image(str(root / "a.png"), ImageScope([str(root)])) == image(PNG)
    assert read_image(str(root / "photo.png"), ImageScope([str(root)])) == ImageData(
        "image/jpeg", base64.b64encode(JPEG).decode("ascii")
    )
    assert read_image(str(root / "anim.webp"), ImageScope([str(root)])) == image(GIF89)


def test_read_image_in_a_second_root(tmp_path: Path, root: Path) -> None:
    """Any of the session's roots (cwd and additional directories) may hold the image."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.gif").write_bytes(GIF87)
    assert read_image(str(other / "b.gif"), ImageScope([str(root), str(other)])) == image(GIF87)


def test_read_image_outside_roots_refused(tmp_path: Path, root: Path) -> None:
    """Images outside every root, including a sibling sharing the root's prefix, are refused."""
    (tmp_path / "out.png").write_bytes(PNG)
    sibling = tmp_path / "root2"
    sibling.mkdir()
    (sibling / "a.png").write_bytes(PNG)
    assert read_image(str(tmp_path / "out.png"), ImageScope([str(root)])) is None
    assert read_image(str(sibling / "a.png"), ImageScope([str(root)])) is None


def test_read_image_symlinks(tmp_path: Path, root: Path) -> None:
    """A symlink leading out of the roots is refused; one staying inside is followed."""
    (tmp_path / "secret.png").write_bytes(PNG)
    (root / "escape.png").symlink_to(tmp_path / "secret.png")
    (root / "real.png").write_bytes(PNG)
    (root / "alias.png").symlink_to(root / "real.png")
    assert read_image(str(root / "escape.png"), ImageScope([str(root)])) is None
    assert read_image(str(root / "alias.png"), ImageScope([str(root)])) == image(PNG)


def test_read_image_through_a_symlinked_root(tmp_path: Path, root: Path) -> None:
    """A root given through a symlink still contains its files."""
    (root / "a.png").write_bytes(PNG)
    (tmp_path / "link").symlink_to(root)
    link = str(tmp_path / "link")
    assert read_image(str(tmp_path / "link" / "a.png"), ImageScope([link])) == image(PNG)


@pytest.mark.parametrize(
    ("size", "accepted"),
    [(MAX_INLINE_IMAGE_BYTES, True), (MAX_INLINE_IMAGE_BYTES + 1, False)],
    ids=["exactly-2MiB", "over-2MiB"],
)
def test_read_image_size_limit(root: Path, size: int, accepted: bool) -> None:
    """Images up to 2 MiB are inlined; larger ones are refused."""
    data = PNG + b"\x00" * (size - len(PNG))
    (root / "big.png").write_bytes(data)
    found = read_image(str(root / "big.png"), ImageScope([str(root)]))
    assert (found == image(data)) if accepted else (found is None)


@pytest.mark.parametrize(
    ("name", "content"),
    [("text.png", b"not an image at all"), ("empty.png", b""), ("svg.png", b"<svg/>")],
)
def test_read_image_non_images_refused(root: Path, name: str, content: bytes) -> None:
    """Bytes that are not a known image type are refused whatever the name says."""
    (root / name).write_bytes(content)
    assert read_image(str(root / name), ImageScope([str(root)])) is None


def _brain(tmp_path: Path) -> tuple[Path, Path, Path]:
    """agy's brain folder with this session's conversation folder and another's."""
    brain = tmp_path / "home" / ".gemini" / "antigravity-cli" / "brain"
    own, other = brain / "conv-own", brain / "conv-other"
    for folder in (own, other):
        folder.mkdir(parents=True)
        (folder / "pic.png").write_bytes(PNG)
    return brain, own, other


def test_read_image_from_this_conversations_folder(tmp_path: Path, root: Path) -> None:
    """agy's folder of this session's conversation is readable besides the roots."""
    brain, own, _ = _brain(tmp_path)
    scope = ImageScope([str(root)], conversation=str(own), brain=str(brain))
    assert read_image(str(own / "pic.png"), scope) == image(PNG)


def test_read_image_from_another_conversations_folder_refused(
    tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another conversation's folder is refused, directly, through a symlink in this
    conversation's folder, or through ``..``; the log says why. Before agy named the
    conversation, every conversation folder is another's."""
    brain, own, other = _brain(tmp_path)
    (own / "alias.png").symlink_to(other / "pic.png")
    scope = ImageScope([str(root)], conversation=str(own), brain=str(brain))
    for path in (other / "pic.png", own / "alias.png", own / ".." / "conv-other" / "pic.png"):
        caplog.clear()
        assert read_image(str(path), scope) is None
        [record] = caplog.records
        assert record.levelname == "WARNING"
        assert "another agy conversation's folder" in record.getMessage()
        assert str(own) in record.getMessage()
    unknown = ImageScope([str(root)], conversation=None, brain=str(brain))
    assert read_image(str(own / "pic.png"), unknown) is None


def test_observe_tells_why_another_conversations_image_is_not_shown(
    tmp_path: Path, root: Path
) -> None:
    """Only a refusal worth telling the user (another conversation's folder) is kept."""
    brain, own, other = _brain(tmp_path)
    (tmp_path / "loose.png").write_bytes(PNG)
    scope = ImageScope([str(root)], conversation=str(own), brain=str(brain))
    paths = [str(own / "pic.png"), str(other / "pic.png"), str(tmp_path / "loose.png")]
    seen = observe([], paths, scope)
    assert list(seen.images) == [paths[0]]
    assert list(seen.refused) == [paths[1]]
    assert seen.refused[paths[1]].startswith("it is in another agy conversation's folder")


def test_image_scope_says_why(tmp_path: Path, root: Path) -> None:
    """Outside every root and every conversation folder: refused, at info level."""
    brain, own, _ = _brain(tmp_path)
    scope = ImageScope([str(root)], conversation=str(own), brain=str(brain))
    (tmp_path / "loose.png").write_bytes(PNG)
    refusal = scope.refusal(str(tmp_path / "loose.png"))
    assert refusal is not None and refusal[1] == "it is outside the session's folders"
    assert scope.refusal(str(root / "x.png")) is None


def test_read_image_missing_or_directory(root: Path) -> None:
    """A missing file or a directory named like an image gives None."""
    (root / "dir.png").mkdir()
    assert read_image(str(root / "missing.png"), ImageScope([str(root)])) is None
    assert read_image(str(root / "dir.png"), ImageScope([str(root)])) is None


def test_read_text_file(tmp_path: Path) -> None:
    """Text comes back decoded; a missing file is None; binary and huge files raise."""
    (tmp_path / "a.txt").write_text("héllo\n", encoding="utf-8")
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "huge").write_bytes(b"a" * (MAX_DIFF_FILE_BYTES + 1))
    (tmp_path / "limit").write_bytes(b"a" * MAX_DIFF_FILE_BYTES)
    assert read_text_file(str(tmp_path / "a.txt")) == "héllo\n"
    assert read_text_file(str(tmp_path / "missing")) is None
    assert read_text_file(str(tmp_path / "limit")) == "a" * MAX_DIFF_FILE_BYTES
    for name in ("bin", "huge"):
        with pytest.raises(ValueError):
            read_text_file(str(tmp_path / name))


def test_observe(root: Path) -> None:
    """Readable texts and missing files are observed; unusable files and images are absent."""
    (root / "a.py").write_text("print(1)\n")
    (root / "bin").write_bytes(b"\x00\xff\xfe")
    (root / "huge").write_bytes(b"a" * (MAX_DIFF_FILE_BYTES + 1))
    (root / "ok.png").write_bytes(PNG)
    (root / "fake.png").write_bytes(b"text")
    paths = {name: os.path.join(root, name) for name in ("a.py", "bin", "huge", "new.py")}
    images = [os.path.join(root, n) for n in ("ok.png", "fake.png", "missing.png")]
    seen = observe(list(paths.values()), images, ImageScope([str(root)]))
    assert seen.files == {paths["a.py"]: "print(1)\n", paths["new.py"]: None}
    assert seen.images == {images[0]: image(PNG)}


def test_observe_nothing() -> None:
    """Nothing asked, nothing read."""
    seen = observe([], [], ImageScope([CWD]))
    assert (dict(seen.files), dict(seen.images)) == ({}, {})


async def test_a_fifo_or_device_named_as_edit_target_or_image_is_not_read(root: Path) -> None:
    """An edit target or image path that is a FIFO (open blocks until a writer
    comes) or a device (/dev/zero never ends; its size reads 0) is refused
    without waiting: these reads run as agy's lines arrive and on the
    session's loop. The bounded wait below only detects a hang."""
    fifo = root / "pipe.png"
    os.mkfifo(fifo)
    try:
        with trio.move_on_after(20) as waited:
            found = await trio.to_thread.run_sync(
                lambda: (
                    observe([str(fifo)], [str(fifo)], ImageScope([str(root)])),
                    snapshot_edit_target(_edit_step(str(fifo))),
                ),
                abandon_on_cancel=True,
            )
    finally:
        # Release a reader stuck in open() (the code before the fix).
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        os.close(fd)
    assert not waited.cancelled_caught, "reading a FIFO blocked"
    seen, snapshot = found
    assert seen.files == {} and seen.images == {} and snapshot is None
    with pytest.raises(ValueError, match="not a regular file"):
        read_text_file("/dev/zero")


def _edit_step(path: str) -> StepUpdateEvent:
    info = ToolInfo(name="write_to_file", parameters={"TargetFile": path})
    return StepUpdateEvent(
        StepUpdate(3, "ACTIVE", "tool", tool_name="write_to_file", tool_info=info)
    )
