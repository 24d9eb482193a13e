"""peek_cache: the discovery cache read before the store is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from agybridge.store import Store
from agybridge.store.peek import peek_cache


def test_peek_answers_like_cache_get(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store.open(path, clock=lambda: 1000.0) as store:
        store.cache_put("discovery", {"models": [{"slug": "m"}]}, 60)
        assert store.cache_get("discovery") == peek_cache(path, "discovery", now=1000.0)
    assert peek_cache(path, "discovery", now=1059.0) == {"models": [{"slug": "m"}]}
    assert peek_cache(path, "discovery", now=1060.0) is None  # expired
    assert peek_cache(path, "other", now=1000.0) is None


def test_peek_never_creates_or_breaks_a_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    assert peek_cache(missing, "discovery") is None and not missing.exists()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    assert peek_cache(junk, "discovery") is None
    assert junk.read_bytes() == b"not a database at all" * 100
    assert peek_cache(tmp_path, "discovery") is None  # a directory


def test_peek_of_a_place_it_cannot_look_at_is_no_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stat(2) refused (a directory on the way that cannot be searched; root
    is never refused, so the refusal is simulated): initialize must not fail."""

    def refused(self: Path) -> bool:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "is_file", refused)
    assert peek_cache(tmp_path / "s.db", "discovery") is None
