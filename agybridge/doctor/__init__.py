"""``agybridge doctor`` and ``/doctor``: every setup problem, each with a fix.

``checks`` builds the checks from facts, ``gather`` learns the facts by
running agy (the command line), ``report`` renders them.
"""

from .checks import Check as Check
from .checks import Status as Status
from .checks import failures as failures
from .gather import run_checks as run_checks
from .report import lines as lines
from .report import text as text
from .report import to_json as to_json
