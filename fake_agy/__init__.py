"""A faithful, scenario-driven stand-in for Google's agy CLI (see ``main``).

Its own top-level package, not part of ``agybridge``: the bridge never
imports it while serving. It ships in the wheel so that ``agybridge demo``
works from an install, and runs as ``python -m fake_agy`` — deliberately no
console script, so nothing named like agy lands on ``PATH``.
"""

from ._fake_scenarios import SCENARIOS as SCENARIOS
