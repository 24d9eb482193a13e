"""``python -m fake_agy``: run the fake agy (``main.main``; ``bin/fake-agy`` from a checkout).

agy is a Go program: it is gone a moment after its last line. The fake
flushes what it wrote and leaves the same way, without the interpreter's
teardown, which took 10-35 ms after a SIGINT's result and so timed Python's
exit, not agy's, whenever a test or benchmark waited for the process to end
(a cancel is answered once agy has exited).
"""

import os
import sys

from .main import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
