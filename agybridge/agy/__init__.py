"""Everything about the agy child: argv, events, stderr, process supervision."""

from .argv import LaunchSpec as LaunchSpec
from .argv import build_argv as build_argv
from .events import AgyEvent as AgyEvent
from .events import InitEvent as InitEvent
from .events import MalformedLine as MalformedLine
from .events import Result as Result
from .events import ResultEvent as ResultEvent
from .events import StepUpdate as StepUpdate
from .events import StepUpdateEvent as StepUpdateEvent
from .events import UnknownEvent as UnknownEvent
from .events import Usage as Usage
from .events import parse_event as parse_event
from .process import AgyChild as AgyChild
from .process import AgySpawnError as AgySpawnError
from .process import ChildEvent as ChildEvent
from .process import ChildEvents as ChildEvents
from .process import ChildExited as ChildExited
from .process import ChildMessage as ChildMessage
from .process import ChildStderr as ChildStderr
from .process import EscalationPolicy as EscalationPolicy
from .stderr import StderrKind as StderrKind
from .stderr import StderrLine as StderrLine
from .stderr import classify_stderr as classify_stderr
