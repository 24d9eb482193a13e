"""Everything about the agy child: argv, events, stderr, process supervision."""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
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
    from .ownership import end_orphans as end_orphans
    from .ownership import watched as watched
    from .policy import EscalationPolicy as EscalationPolicy
    from .process import AgyChild as AgyChild
    from .process import AgySpawnError as AgySpawnError
    from .process import ChildEvent as ChildEvent
    from .process import ChildEvents as ChildEvents
    from .process import ChildExited as ChildExited
    from .process import ChildMessage as ChildMessage
    from .process import ChildStderr as ChildStderr
    from .process import MessageSink as MessageSink
    from .signin import ProbeResult as ProbeResult
    from .signin import SignIn as SignIn
    from .signin import classify_probe as classify_probe
    from .signin import probe_sign_in as probe_sign_in
    from .stderr import StderrKind as StderrKind
    from .stderr import StderrLine as StderrLine
    from .stderr import classify_stderr as classify_stderr
    from .tree import Completed as Completed
    from .tree import ProcessTree as ProcessTree
    from .tree import bridge_identity as bridge_identity
    from .tree import run_owned as run_owned

# Loaded on first use (agybridge/lazy.py): the bridge answers initialize without them.
__getattr__ = exports(
    __name__,
    {
        ".argv": ("LaunchSpec", "build_argv"),
        ".events": (
            "AgyEvent",
            "InitEvent",
            "MalformedLine",
            "Result",
            "ResultEvent",
            "StepUpdate",
            "StepUpdateEvent",
            "UnknownEvent",
            "Usage",
            "parse_event",
        ),
        ".ownership": ("end_orphans", "watched"),
        ".process": (
            "AgyChild",
            "AgySpawnError",
            "ChildEvent",
            "ChildEvents",
            "ChildExited",
            "ChildMessage",
            "ChildStderr",
            "MessageSink",
        ),
        ".signin": ("ProbeResult", "SignIn", "classify_probe", "probe_sign_in"),
        ".stderr": ("StderrKind", "StderrLine", "classify_stderr"),
        ".policy": ("EscalationPolicy",),
        ".tree": ("Completed", "ProcessTree", "bridge_identity", "run_owned"),
    },
)
