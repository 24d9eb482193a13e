"""How long an agy process tree gets at each step of the stop ladder.

Its own module, without the tree's machinery: the bridge's settings carry one
before ``initialize`` is answered, and `agybridge.agy.tree` (procfs, signals)
is loaded by the first agy invocation (lazy start-up).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class EscalationPolicy:
    """Grace after SIGINT before SIGTERM, and after SIGTERM before SIGKILL."""

    sigint_grace_s: float = 2.0
    sigterm_grace_s: float = 1.0
