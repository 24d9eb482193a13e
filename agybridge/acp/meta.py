"""``_meta``: the free JSON object any ACP type may carry (extensibility.mdx).

Its own module because both halves of the wire types use it: `models` (what
``initialize`` needs) and `session_models` (loaded through `models` later).
"""

from __future__ import annotations

from typing import Any, TypeAlias

Meta: TypeAlias = dict[str, Any]
