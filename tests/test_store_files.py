"""Opening the database file: migrations, newer versions, bad files moved aside, paths."""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
from pathlib import Path

import attrs
import platformdirs
import pytest

from agybridge.store import (
    SessionRecord,
    Store,
    StorePathError,
    StoreUnavailableError,
    StoreVersionError,
    _opening,
    default_db_path,
    legacy_paths,
)
from agybridge.store._opening import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

REC = SessionRecord(
    "s1", "/w", title="kept", created_at="2026-05-01T10:00:00Z", updated_at="2026-05-01T10:00:00Z"
)


def pragma(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        value: int = conn.execute(f"PRAGMA {name}").fetchone()[0]
        return value
    finally:
        conn.close()


def asides(path: Path) -> list[Path]:
    """Databases moved aside (not their -wal/-shm sidecars)."""
    found = path.parent.glob(path.name + ".corrupt-*")
    return sorted(p for p in found if not p.name.endswith(("-wal", "-shm", "-journal")))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_real_db(path: Path, sessions: int) -> None:
    with Store.open(path) as store:
        for n in range(sessions):
            store.upsert_session(
                SessionRecord(f"s{n:05d}", f"/work/{n % 7}", title="x" * 200, meta={"n": n})
            )


# --------------------------------------------------------------------------- versions


def test_fresh_database_is_current_private_and_in_wal_mode(tmp_path: Path) -> None:
    """A new database gets the current version, our application id, WAL, 0600 in a 0700 dir."""
    path = tmp_path / "new" / "agybridge.db"
    with Store.open(path) as store:
        assert store.path == path
        assert pragma(path, "journal_mode") == "wal"  # type: ignore[comparison-overlap]
    assert pragma(path, "user_version") == SCHEMA_VERSION == len(MIGRATIONS)
    assert pragma(path, "application_id") == APPLICATION_ID
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_version_1_database_is_migrated_keeping_its_rows(tmp_path: Path) -> None:
    """A v1 file (sessions and journal only) gains the v2 tables; rows survive."""
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO sessions VALUES ('s1', '/w', '[]', '[]', NULL, 'kept', '{}', "
        "'2026-05-01T10:00:00.000000Z', '2026-05-01T10:00:00.000000Z', '{}')"
    )
    conn.execute("PRAGMA user_version = 1")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.close()
    with Store.open(path) as store:
        assert store.get_session("s1") == REC
        store.cache_put("k", [1], ttl_s=10)
        assert store.cache_get("k") == [1]
        store.upsert_session(SessionRecord("s2", "/w", updated_at="2026-05-01T09:00:00Z"))
        _, cursor = store.list_sessions(limit=1)
        assert cursor is not None
        assert [r.session_id for r in store.list_sessions(cursor=cursor)[0]] == ["s2"]
    assert pragma(path, "user_version") == SCHEMA_VERSION
    assert asides(path) == []


def test_newer_version_is_refused_and_left_untouched(tmp_path: Path) -> None:
    """A file from a newer agybridge raises StoreVersionError; not a byte changes."""
    path = tmp_path / "future.db"
    make_real_db(path, 3)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    before = digest(path)
    with pytest.raises(StoreVersionError, match="upgrade agybridge") as caught:
        Store.open(path)
    assert (caught.value.found, caught.value.supported) == (SCHEMA_VERSION + 5, SCHEMA_VERSION)
    assert digest(path) == before
    assert asides(path) == []


def test_reopening_keeps_data(tmp_path: Path) -> None:
    """Closing and opening again is a no-op migration."""
    path = tmp_path / "a.db"
    with Store.open(path) as store:
        store.upsert_session(REC)
    with Store.open(path) as store:
        assert store.get_session("s1") == REC
    assert asides(path) == []


# --------------------------------------------------------------------------- bad files


def garbage(path: Path) -> None:
    path.write_bytes(b"this is not a database\x00\xff" * 300)


def truncated(path: Path) -> None:
    make_real_db(path, 3000)
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size // 3)


def foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE sessions (id INTEGER, blob BLOB)")
    conn.execute("PRAGMA application_id = 12345")
    conn.commit()
    conn.close()


def clashing(path: Path) -> None:
    """A foreign database without an application id whose table clashes with ours."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE sessions (id INTEGER)")
    conn.commit()
    conn.close()


def header_only(path: Path) -> None:
    make_real_db(path, 500)
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\x00" * (len(data) - 100))


BAD_FILES = [garbage, truncated, foreign, clashing, header_only]


@pytest.mark.parametrize("spoil", BAD_FILES)
def test_bad_file_is_moved_aside_and_a_fresh_database_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, spoil: object
) -> None:
    """Garbage, a truncated db or a foreign db: renamed aside, logged, replaced."""
    path = tmp_path / "agybridge.db"
    spoil(path)  # type: ignore[operator]
    before = digest(path)
    with caplog.at_level(logging.WARNING, logger="agybridge.store"), Store.open(path) as store:
        store.upsert_session(REC)
        assert store.get_session("s1") == REC
    [aside] = asides(path)
    assert aside.name.startswith("agybridge.db.corrupt-2")
    assert digest(aside) == before
    warning = next(r.getMessage() for r in caplog.records if "moved it aside" in r.getMessage())
    assert str(path) in warning and str(aside) in warning
    with Store.open(path) as store:
        assert store.get_session("s1") == REC
    assert asides(path) == [aside]


def test_stale_wal_moves_aside_with_its_database(tmp_path: Path) -> None:
    """The -wal and -shm of a bad file go with it, so they are never replayed into the new one."""
    path = tmp_path / "agybridge.db"
    garbage(path)
    Path(f"{path}-wal").write_bytes(b"old wal")
    Path(f"{path}-shm").write_bytes(b"old shm")
    # Directly: SQLite itself may discard a WAL it cannot use when it opens the file.
    aside = _opening._move_aside(path, "garbage")
    assert asides(path) == [aside]
    assert Path(f"{aside}-wal").read_bytes() == b"old wal"
    assert Path(f"{aside}-shm").read_bytes() == b"old shm"


def test_garbage_with_a_stale_wal_opens_fresh(tmp_path: Path) -> None:
    """Garbage plus a leftover -wal: the fresh database starts empty and healthy."""
    path = tmp_path / "agybridge.db"
    garbage(path)
    Path(f"{path}-wal").write_bytes(b"old wal" * 1000)
    with Store.open(path) as store:
        assert store.list_sessions() == ([], None)
        store.upsert_session(REC)
    with Store.open(path) as store:
        assert store.get_session("s1") == REC
    assert len(asides(path)) == 1


def test_two_bad_opens_in_one_second_get_distinct_names(tmp_path: Path) -> None:
    """A second bad file moved aside in the same second does not overwrite the first."""
    path = tmp_path / "agybridge.db"
    for _ in range(2):
        garbage(path)
        Store.open(path).close()
    assert len(asides(path)) == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_moved_aside(tmp_path: Path) -> None:
    """A database the user cannot read is moved aside like a corrupt one."""
    path = tmp_path / "agybridge.db"
    make_real_db(path, 2)
    path.chmod(0)
    with Store.open(path) as store:
        assert store.list_sessions() == ([], None)
    assert len(asides(path)) == 1


def test_unusable_location_is_a_clear_error(tmp_path: Path) -> None:
    """When the directory cannot exist (a file is in the way), open says so."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a directory")
    with pytest.raises(StoreUnavailableError, match="cannot create its directory") as caught:
        Store.open(blocker / "agybridge.db")
    assert caught.value.path == blocker / "agybridge.db"


# --------------------------------------------------------------------------- paths

DB_PATH_CASES = [
    ({"AGYBRIDGE_DB": "/data/bridge.db"}, Path("/data/bridge.db")),
    ({"AGYBRIDGE_DB": "~/bridge.db", "HOME": "/h"}, Path.home() / "bridge.db"),
]


@pytest.mark.parametrize(("env", "expected"), DB_PATH_CASES)
def test_default_db_path_honours_the_env(env: dict[str, str], expected: Path) -> None:
    """AGYBRIDGE_DB wins (with ~ expanded)."""
    assert default_db_path(env) == expected


@pytest.mark.parametrize("env", [{}, {"AGYBRIDGE_DB": ""}, {"AGYBRIDGE_DB": "  "}])
def test_default_db_path_is_under_the_user_state_dir(env: dict[str, str]) -> None:
    """Unset or blank AGYBRIDGE_DB means <user state dir>/agybridge.db."""
    expected = Path(platformdirs.user_state_dir("agybridge")) / "agybridge.db"
    assert default_db_path(env) == expected


HOME = Path("/home/u")
LEGACY_CASES = [
    ({}, HOME / ".agy-acp-map/sessions.json", HOME / ".agy-acp-map/history"),
    ({"AGY_ACP_STORE": "/s/a.json"}, Path("/s/a.json"), Path("/s/history")),
    (
        {"AGY_ACP_STORE": "/s/a.json", "AGY_ACP_SESSION_STORE": "/t/b.json"},
        Path("/t/b.json"),
        Path("/t/history"),
    ),
    ({"AGY_ACP_HISTORY_DIR": "/h/hist"}, HOME / ".agy-acp-map/sessions.json", Path("/h/hist")),
    (
        {"AGY_ACP_STORE": " ", "AGY_ACP_HISTORY_DIR": ""},
        HOME / ".agy-acp-map/sessions.json",
        HOME / ".agy-acp-map/history",
    ),
]


@pytest.mark.parametrize(("env", "sessions_file", "history_dir"), LEGACY_CASES)
def test_legacy_paths_resolve_like_agy_acp_map(
    env: dict[str, str], sessions_file: Path, history_dir: Path
) -> None:
    """AGY_ACP_SESSION_STORE > AGY_ACP_STORE > default; history beside the index unless set."""
    found = legacy_paths(env, home=HOME)
    assert (found.sessions_file, found.history_dir) == (sessions_file, history_dir)


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("x")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _symlink_to_directory(path: Path) -> None:
    target = path.with_name("real-dir")
    _directory(target)
    path.symlink_to(target)


def _dangling_symlink(path: Path) -> None:
    path.symlink_to(path.with_name("nowhere"))


def _device(path: Path) -> None:
    path.symlink_to("/dev/null")


NOT_FILES = {
    _directory: "a directory",
    _fifo: "a FIFO",
    _symlink_to_directory: "a symlink to a directory",
    _dangling_symlink: "a symlink to nothing",
    _device: "a symlink to a character device",
}


@pytest.mark.parametrize("make", list(NOT_FILES))
def test_a_path_that_is_not_a_file_is_refused_and_untouched(tmp_path: Path, make: object) -> None:
    """A directory, FIFO, device or symlink to one as the database: a clear error naming
    the path and what it is; nothing is moved, created or changed."""
    path = tmp_path / "projects"
    make(path)  # type: ignore[operator]
    before = sorted((p.name, p.is_symlink()) for p in tmp_path.rglob("*"))
    with pytest.raises(StorePathError) as caught:
        Store.open(path)
    assert caught.value.path == path
    assert str(path) in str(caught.value)
    assert NOT_FILES[make] in str(caught.value)  # type: ignore[index]
    assert sorted((p.name, p.is_symlink()) for p in tmp_path.rglob("*")) == before


def test_a_symlink_to_a_database_file_is_used(tmp_path: Path) -> None:
    """A symlink to a regular file is fine: the file behind it is the database."""
    real = tmp_path / "real.db"
    make_real_db(real, 1)
    link = tmp_path / "agybridge.db"
    link.symlink_to(real)
    with Store.open(link) as store:
        store.upsert_session(REC)
    assert link.is_symlink()
    with Store.open(real) as store:
        assert store.get_session("s1") == REC


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_database_deleted_or_replaced_while_open_is_reopened(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """Deleting or replacing the file under a running store is noticed at the next
    write: the store reopens the path (with a warning) instead of writing into the
    unlinked file."""
    path = tmp_path / "agybridge.db"
    with Store.open(path) as store:
        store.upsert_session(REC)
        # `rm agybridge.db`: the -wal and -shm stay (they must not be replayed).
        path.unlink()
        if how == "replaced":
            make_real_db(path, 0)
        with caplog.at_level(logging.WARNING, logger="agybridge.store"):
            store.upsert_session(attrs.evolve(REC, session_id="s2"))
        assert store.reopened == 1
        warning = next(
            r.getMessage() for r in caplog.records if "while the bridge ran" in r.getMessage()
        )
        assert str(path) in warning and how in warning
    with Store.open(path) as store:
        assert store.get_session("s2") is not None
        # A fresh file (deleted) or the replacement: nothing of the old one replayed.
        assert store.get_session("s1") is None
