"""One writer per session database (store/claim.py): bridges share it, a
daemon has it alone, and whoever comes second is told who has it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agybridge.store import (
    StoreInUseError,
    claim_for_bridge,
    claim_for_daemon,
    release_claim,
)


def test_stdio_bridges_share_a_database(tmp_path: Path) -> None:
    db = tmp_path / "agybridge.db"
    first, second = claim_for_bridge(db), claim_for_bridge(db)
    release_claim(first, daemon=False)
    release_claim(second, daemon=False)


def test_a_second_daemon_is_told_which_daemon_has_the_database(tmp_path: Path) -> None:
    db = tmp_path / "agybridge.db"
    first = claim_for_daemon(db, "/run/one.sock")
    try:
        with pytest.raises(StoreInUseError) as caught:
            claim_for_daemon(db, "/run/two.sock")
        message = str(caught.value)
        assert f"pid {os.getpid()}, socket /run/one.sock" in message, message
        assert str(db) in message and "AGYBRIDGE_DB" in message
        with pytest.raises(StoreInUseError, match="agybridge attach") as bridge:
            claim_for_bridge(db)
        assert "socket /run/one.sock" in str(bridge.value)
    finally:
        release_claim(first, daemon=True)
    release_claim(claim_for_daemon(db, "/run/two.sock"), daemon=True)  # free again


def test_a_daemon_does_not_start_beside_a_stdio_bridge(tmp_path: Path) -> None:
    db = tmp_path / "agybridge.db"
    bridge = claim_for_bridge(db)
    try:
        with pytest.raises(StoreInUseError, match="over stdio"):
            claim_for_daemon(db, "/run/one.sock")
    finally:
        release_claim(bridge, daemon=False)


def test_a_symlinked_claim_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me")
    db = tmp_path / "agybridge.db"
    (tmp_path / "agybridge.db.lock").symlink_to(target)
    with pytest.raises(StoreInUseError, match="symlink"):
        claim_for_daemon(db, "/run/one.sock")
    assert target.read_text() == "keep me"
