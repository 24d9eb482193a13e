"""The store: one SQLite database holding the session index and display-history journal.

A low layer: it imports nothing from the rest of agybridge. The session layer uses
`AsyncStore` (trio) or `Store` (threads); `agybridge.config` resolves the paths with
`default_db_path` and `legacy_paths`.
"""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .aio import AsyncStore as AsyncStore
    from .claim import StoreInUseError as StoreInUseError
    from .claim import claim_for_bridge as claim_for_bridge
    from .claim import claim_for_daemon as claim_for_daemon
    from .claim import release_claim as release_claim
    from .db import DEFAULT_LIST_LIMIT as DEFAULT_LIST_LIMIT
    from .db import MAX_LIST_LIMIT as MAX_LIST_LIMIT
    from .db import SCHEMA_VERSION as SCHEMA_VERSION
    from .db import Store as Store
    from .db import StoreStatistics as StoreStatistics
    from .edits import BLOB_KEY as BLOB_KEY
    from .edits import MUTATION_LOG_KEY as MUTATION_LOG_KEY
    from .edits import referenced_blobs as referenced_blobs
    from .errors import InvalidCursorError as InvalidCursorError
    from .errors import StoreBadFileError as StoreBadFileError
    from .errors import StoreClosedError as StoreClosedError
    from .errors import StoreError as StoreError
    from .errors import StorePathError as StorePathError
    from .errors import StoreUnavailableError as StoreUnavailableError
    from .errors import StoreVersionError as StoreVersionError
    from .legacy import IMPORT_FLAG as IMPORT_FLAG
    from .legacy import LAUNCH_FIELDS as LAUNCH_FIELDS
    from .legacy import ImportReport as ImportReport
    from .legacy import import_agy_acp_map as import_agy_acp_map
    from .models import JournalEntry as JournalEntry
    from .models import JournalKind as JournalKind
    from .models import SessionRecord as SessionRecord
    from .models import canonical_timestamp as canonical_timestamp
    from .models import format_timestamp as format_timestamp
    from .models import utc_now as utc_now
    from .paths import LegacyPaths as LegacyPaths
    from .paths import check_path as check_path
    from .paths import default_db_path as default_db_path
    from .paths import legacy_paths as legacy_paths

# Loaded on first use (agybridge/lazy.py): the bridge answers initialize without
# them, and the one-time agy-acp-map import (.legacy) runs at most once per machine.
__getattr__ = exports(
    __name__,
    {
        ".aio": ("AsyncStore",),
        ".claim": ("StoreInUseError", "claim_for_bridge", "claim_for_daemon", "release_claim"),
        ".db": (
            "DEFAULT_LIST_LIMIT",
            "MAX_LIST_LIMIT",
            "SCHEMA_VERSION",
            "Store",
            "StoreStatistics",
        ),
        ".edits": ("BLOB_KEY", "MUTATION_LOG_KEY", "referenced_blobs"),
        ".errors": (
            "InvalidCursorError",
            "StoreBadFileError",
            "StoreClosedError",
            "StoreError",
            "StorePathError",
            "StoreUnavailableError",
            "StoreVersionError",
        ),
        ".models": (
            "JournalEntry",
            "JournalKind",
            "SessionRecord",
            "canonical_timestamp",
            "format_timestamp",
            "utc_now",
        ),
        ".paths": ("LegacyPaths", "check_path", "default_db_path", "legacy_paths"),
        ".legacy": ("IMPORT_FLAG", "LAUNCH_FIELDS", "ImportReport", "import_agy_acp_map"),
    },
)
