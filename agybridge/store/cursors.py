"""``session/list``'s cursors: the last row's key (``updated_at``,
``session_id``), signed with a per-database key, so that a tampered or foreign
cursor is refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from .errors import InvalidCursorError
from .models import SessionRecord


class Cursors:
    """Hands out and reads back the cursors of one database (its ``key``)."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, updated_at: str, session_id: str) -> str:
        # surrogatepass: a forged cursor may name a lone surrogate ("\ud800" in its
        # JSON); its signature just does not match.
        message = f"{updated_at}\x00{session_id}".encode("utf-8", "surrogatepass")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()[:32]

    def encode(self, last: SessionRecord) -> str:
        """The cursor of the page after ``last``."""
        payload = {
            "u": last.updated_at,
            "s": last.session_id,
            "m": self._mac(last.updated_at, last.session_id),
        }
        raw = json.dumps(payload, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    def decode(self, cursor: str) -> tuple[str, str]:
        """``(updated_at, session_id)`` of a cursor `encode` made.

        Raises:
            InvalidCursorError: not a cursor of this database.
        """
        if not isinstance(cursor, str) or not cursor:
            raise InvalidCursorError(str(cursor), "it is empty or not a string")
        try:
            raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
            data = json.loads(raw)
        except ValueError:
            raise InvalidCursorError(cursor, "it is not a cursor") from None
        if not (
            isinstance(data, dict)
            and set(data) == {"u", "s", "m"}
            and all(isinstance(v, str) for v in data.values())
        ):
            raise InvalidCursorError(cursor, "it is not a cursor")
        # compare_digest refuses a str that is not ASCII (TypeError): compare bytes.
        forged = data["m"].encode("utf-8", "surrogatepass")
        if not hmac.compare_digest(forged, self._mac(data["u"], data["s"]).encode()):
            raise InvalidCursorError(cursor, "it was altered, or comes from another database")
        return data["u"], data["s"]
