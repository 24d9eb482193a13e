"""The workstation supervisor: ``agybridge daemon`` (README "Long-running
sessions"). ``attach``, ``status`` and ``stop`` live in ``agybridge.attach``
(standard library only)."""

from .listener import DaemonRunningError as DaemonRunningError
from .supervisor import run_daemon as run_daemon
