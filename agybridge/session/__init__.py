"""Sessions: one nursery per ACP session, the turn queue and the pure mapper."""

from .errors import AgyExitedError as AgyExitedError
from .errors import AgyStartError as AgyStartError
from .errors import AuthRequiredError as AuthRequiredError
from .errors import InvalidModelError as InvalidModelError
from .errors import SessionError as SessionError
from .manager import SessionManager as SessionManager
from .mapper import MapperError as MapperError
from .mapper import TurnMapper as TurnMapper
from .session import PromptResult as PromptResult
from .session import Session as Session
