"""The ACP agent layer: method handlers, prompt preparation and the
bridge's own slash commands, on top of the sessions."""

from .handlers import AcpAgent as AcpAgent
from .updates import send_updates_via as send_updates_via
