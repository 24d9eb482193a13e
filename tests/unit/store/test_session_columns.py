"""A session row's JSON columns are what json.dumps makes of the record (the
store encodes them with prebuilt encoders)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agybridge.store import SessionRecord
from agybridge.store.columns import session_params

_dirs = st.lists(st.text(min_size=1, max_size=4), max_size=3).map(tuple)


def _general(record: SessionRecord) -> tuple[object, ...]:
    def dumps(value: Any, sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys)

    return (
        record.session_id,
        record.cwd,
        dumps(list(record.additional_dirs)),
        dumps(sorted(set(record.additional_dirs))),
        record.conversation_id,
        record.title,
        dumps(dict(record.launch), sort_keys=True),
        record.created_at,
        record.updated_at,
        dumps(dict(record.meta), sort_keys=True),
    )


@given(
    st.lists(_dirs, min_size=1, max_size=3),
    st.lists(st.integers(0, 2), min_size=1, max_size=6),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3), max_size=2),
)
def test_a_rows_columns_are_its_records_json(
    dirs: list[tuple[str, ...]], order: list[int], launch: dict[str, str], meta: dict[str, Any]
) -> None:
    for i in order:
        record = SessionRecord(
            session_id="s",
            cwd="/w",
            additional_dirs=dirs[i % len(dirs)],
            launch=launch,
            meta=meta,
        )
        assert session_params(record) == _general(record)
