"""Sessions: one nursery per ACP session, the turn queue and the pure mapper."""

from .manager import SessionManager as SessionManager
from .mapper import MapperError as MapperError
from .mapper import TurnMapper as TurnMapper
from .session import AgyExitedError as AgyExitedError
from .session import AgyStartError as AgyStartError
from .session import AuthRequiredError as AuthRequiredError
from .session import InvalidModelError as InvalidModelError
from .session import PromptResult as PromptResult
from .session import Session as Session
from .session import SessionError as SessionError
