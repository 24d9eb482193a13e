"""A bridge process's host: the stdio bridge's and the daemon's shared shape
(host.py), their clients (connection.py), their shutdown (shutdown.py), what
they do beside serving (housekeeping.py) and their database (store.py)."""

from .connection import CONTROL_METHODS, Connection, Control
from .host import AfterClose, ClientEnds, Host
from .shutdown import RESPONSE_FLUSH_S, ShutdownClient, stop_budget_s
from .store import deferred_store, open_store

__all__ = [
    "CONTROL_METHODS",
    "RESPONSE_FLUSH_S",
    "AfterClose",
    "ClientEnds",
    "Connection",
    "Control",
    "Host",
    "ShutdownClient",
    "deferred_store",
    "open_store",
    "stop_budget_s",
]
