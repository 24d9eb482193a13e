"""Two bridge processes (and threads within one) share a database without losing a row."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from agybridge.store import JournalEntry, SessionRecord, Store

from ...conftest import REPO

SESSIONS_PER_WRITER = 500
PROCESS_TIMEOUT_S = 120

#: One writer process: waits for "go" on stdin, then opens (so both processes create and
#: migrate the new file at once) and writes each session, then its journal, each in its own
#: transaction, the way a bridge does.
WRITER = """
import sys
from pathlib import Path
from agybridge.store import JournalEntry, SessionRecord, Store

db, prefix, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
print("ready", flush=True)
assert sys.stdin.readline().strip() == "go"
with Store.open(db) as store:
    for n in range(count):
        sid = f"{prefix}-{n:04d}"
        store.upsert_session(SessionRecord(sid, f"/work/{prefix}", title=f"title {n}"))
        store.append_journal([
            JournalEntry.user(sid, 0, 0, f"prompt {sid}"),
            JournalEntry.agent(sid, 0, 1, f"answer {sid}"),
        ])
        store.touch(sid, updated_at="2026-05-01T10:00:00Z", conversation_id=f"conv-{sid}")
print("done", flush=True)
"""


def check_everything_written(path: Path, prefixes: list[str], per_writer: int) -> None:
    with Store.open(path) as store:
        records, cursor = store.list_sessions(limit=1000)
        while cursor is not None:
            more, cursor = store.list_sessions(limit=1000, cursor=cursor)
            records += more
        expected = {f"{p}-{n:04d}" for p in prefixes for n in range(per_writer)}
        assert len(records) == len(expected)
        assert {r.session_id for r in records} == expected
        for rec in records:
            assert rec.conversation_id == f"conv-{rec.session_id}"
            lines = store.journal(rec.session_id)
            assert [(e.kind, e.text) for e in lines] == [
                ("user", f"prompt {rec.session_id}"),
                ("agent", f"answer {rec.session_id}"),
            ]


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    """Two processes create the same new database and write 500 sessions each: 1,000 rows."""
    path = tmp_path / "shared" / "agybridge.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), prefix, str(SESSIONS_PER_WRITER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        for prefix in ("alpha", "beta")
    ]
    try:
        for proc in writers:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for proc in writers:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in writers:
            out, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
            assert proc.returncode == 0, err
            assert out.strip() == "done"
            assert "locked" not in err
    finally:
        for proc in writers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    check_everything_written(path, ["alpha", "beta"], SESSIONS_PER_WRITER)


def test_threads_sharing_and_not_sharing_a_store_lose_nothing(tmp_path: Path) -> None:
    """Four writer threads over two Store objects, with a reader paging all the while."""
    path = tmp_path / "agybridge.db"
    stores = [Store.open(path), Store.open(path)]
    per_thread = 250
    errors: list[BaseException] = []
    writing = threading.Event()
    writing.set()

    def write(store: Store, prefix: str) -> None:
        try:
            for n in range(per_thread):
                sid = f"{prefix}-{n:04d}"
                store.upsert_session(SessionRecord(sid, "/w"))
                store.append_journal(
                    [
                        JournalEntry.user(sid, 0, 0, f"prompt {sid}"),
                        JournalEntry.agent(sid, 0, 1, f"answer {sid}"),
                    ]
                )
                store.touch(sid, updated_at="2026-05-01T10:00:00Z", conversation_id=f"conv-{sid}")
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def read(store: Store) -> None:
        try:
            while writing.is_set():
                # Rows move while we page (keyset pages need not be stable under
                # writes); each page is still one consistent, ordered snapshot.
                cursor = None
                while True:
                    page, cursor = store.list_sessions(cursor=cursor, limit=37)
                    keys = [(r.updated_at, r.session_id) for r in page]
                    assert [u for u, _ in keys] == sorted((u for u, _ in keys), reverse=True)
                    assert len(set(keys)) == len(keys)
                    if cursor is None:
                        break
        except BaseException as exc:
            errors.append(exc)

    prefixes = ["t0", "t1", "t2", "t3"]
    writers = [
        threading.Thread(target=write, args=(stores[i % 2], prefix))
        for i, prefix in enumerate(prefixes)
    ]
    reader = threading.Thread(target=read, args=(stores[0],))
    reader.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=PROCESS_TIMEOUT_S)
    writing.clear()
    reader.join(timeout=PROCESS_TIMEOUT_S)
    for store in stores:
        store.close()
    assert errors == []
    check_everything_written(path, prefixes, per_thread)
