"""The names of the ``_agybridge/*`` extension notifications (docs/extensions.md
"Notifications"). Their own module, importing nothing: ``initialize`` lists
them without loading what builds them (``translate/ext_events.py``)."""

from __future__ import annotations

RUNTIME_UPDATE = "_agybridge/runtime_update"
USAGE_UPDATE = "_agybridge/usage_update"
WARNING = "_agybridge/warning"
ERROR = "_agybridge/error"
SUB_AGENT_START = "_agybridge/sub_agent_invocation_start"
SUB_AGENT_FINISHED = "_agybridge/sub_agent_finished"

#: Every extension notification the bridge sends, in the order ``initialize`` lists them.
NOTIFICATIONS = (
    RUNTIME_UPDATE,
    USAGE_UPDATE,
    WARNING,
    ERROR,
    SUB_AGENT_START,
    SUB_AGENT_FINISHED,
)
