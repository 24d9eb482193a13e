"""stdout carries protocol bytes only (architecture.md, measured rules)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import os, sys
from agybridge.server import claim_stdio
protocol_in, protocol_out = claim_stdio()
print("stray print " * 100000)          # a library's chatter: ~1.2 MB
os.system("echo from-a-child")           # a child inheriting fd 1
os.write(protocol_out, b'{"jsonrpc":"2.0"}\\n')
data = os.read(protocol_in, 100)
os.write(protocol_out, data)
sys.stdout.flush()
"""


def test_stray_output_goes_to_stderr_and_protocol_fds_are_private() -> None:
    """After claim_stdio, print() and inheriting children write to stderr; the
    protocol fds still reach the real stdin/stdout."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        input=b"ping\n",
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == b'{"jsonrpc":"2.0"}\nping\n'
    assert b"from-a-child" in done.stderr
    assert done.stderr.count(b"stray print") == 100000
