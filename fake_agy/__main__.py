"""``python -m fake_agy``: run the fake agy (``main.main``; ``bin/fake-agy`` from a checkout)."""

import sys

from .main import main

sys.exit(main())
