"""Oversized base64 is refused from its length alone: never scanned, never decoded."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from agybridge.acp import attachments, models
from agybridge.acp.content import PromptContentError, convert_prompt
from agybridge.acp.limits import PromptLimits

STAGING = "/run/agybridge/1-0123456789abcdef/attachments"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(24)
HALF_GIGABYTE = 500 * 10**6


class _ClaimsToBeHuge(str):
    """Four real characters that report a length of 500 MB: only len() may look."""

    def __len__(self) -> int:
        return HALF_GIGABYTE


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts base64 decodes; scanning the text for bad characters is forbidden."""
    calls: list[int] = []
    real_decode: Callable[..., bytes] = base64.b64decode

    def counting_decode(data: Any, *args: Any, **kwargs: Any) -> bytes:
        calls.append(len(data))
        return real_decode(data, *args, **kwargs)

    def no_scan(data: str) -> str | None:
        if len(data) > 10**6:
            raise AssertionError("a huge string was scanned")
        return problem(data)

    problem = attachments._base64_problem
    monkeypatch.setattr(base64, "b64decode", counting_decode)
    monkeypatch.setattr(attachments, "_base64_problem", no_scan)
    return calls


def _refusal(block: Any, limits: PromptLimits | None = None) -> PromptContentError:
    with pytest.raises(PromptContentError) as caught:
        convert_prompt([block], staging_dir=STAGING, limits=limits or PromptLimits())
    return caught.value


def test_length_alone_refuses_an_image(decodes: list[int]) -> None:
    """A string claiming 500 MB fails on its length; its four characters are never read."""
    error = _refusal(models.ImageContent(data=_ClaimsToBeHuge("AAAA"), mime_type="image/png"))
    assert str(error) == "Image is larger than the 8 MiB limit."
    assert error.data == {"path": "$.prompt[0].data", "type": "image", "limitBytes": 8 * 2**20}
    assert decodes == []


def test_length_alone_refuses_a_blob(decodes: list[int]) -> None:
    """The same holds for an embedded resource's blob."""
    block = models.EmbeddedResource(resource={"uri": "u", "blob": _ClaimsToBeHuge("JVBE")})
    assert str(_refusal(block)) == "Embedded resource is larger than the 8 MiB limit."
    assert decodes == []


def test_real_half_gigabyte_is_refused_without_decoding(decodes: list[int]) -> None:
    """A real 500 MB string (one cheap allocation) is refused without a decode or a scan."""
    huge = "A" * HALF_GIGABYTE
    error = _refusal(models.ImageContent(data=huge, mime_type="image/png"))
    assert str(error) == "Image is larger than the 8 MiB limit."
    error = _refusal(models.EmbeddedResource(resource={"uri": "u", "blob": huge}))
    assert str(error) == "Embedded resource is larger than the 8 MiB limit."
    assert decodes == []


def test_huge_data_url_is_named_as_such(decodes: list[int]) -> None:
    """A data: URL is recognised from its first characters, whatever its size."""
    data = _ClaimsToBeHuge("data:image/png;base64,AAAA")
    error = _refusal(models.ImageContent(data=data, mime_type="image/png"))
    assert str(error) == "Image data must be plain base64, not a data: URL."
    assert decodes == []


SMALL = PromptLimits(max_file_bytes=32, max_prompt_bytes=48)


@pytest.mark.parametrize(
    ("size", "decoded"),
    [(33, True), (34, False), (35, False), (36, False), (10**4, False)],
)
def test_encoded_length_bound_is_tight(size: int, decoded: bool, decodes: list[int]) -> None:
    """Text longer than 4*ceil(limit/3) is refused undecoded; shorter text is decoded first."""
    data = base64.b64encode(PNG + bytes(size - len(PNG))).decode()
    error = _refusal(models.ImageContent(data=data, mime_type="image/png"), SMALL)
    assert str(error) == "Image is larger than the 32 bytes limit."
    assert decodes == ([len(data)] if decoded else [])


def test_prompt_budget_is_checked_before_decoding(decodes: list[int]) -> None:
    """A block that must exceed the prompt's budget is refused before it is decoded."""
    first = models.ImageContent(data=base64.b64encode(PNG[:30]).decode(), mime_type="image/png")
    second = models.ImageContent(data=base64.b64encode(PNG[:30]).decode(), mime_type="image/gif")
    with pytest.raises(PromptContentError) as caught:
        convert_prompt([first, second], staging_dir=STAGING, limits=SMALL)
    assert caught.value.index == 1
    assert str(caught.value) == (
        "The prompt's attachments are larger than the 48 bytes limit per prompt."
    )
    assert decodes == [40]  # the first image only
