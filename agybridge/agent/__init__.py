"""The ACP agent layer: method handlers, prompt preparation and the
bridge's own slash commands, on top of the sessions."""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .handlers import AcpAgent as AcpAgent
    from .updates import send_updates_via as send_updates_via

# Loaded on first use (agybridge/lazy.py): the update encoder names the
# session/update models, which initialize does not need.
__getattr__ = exports(__name__, {".handlers": ("AcpAgent",), ".updates": ("send_updates_via",)})
