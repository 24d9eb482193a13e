"""The light side of the workstation supervisor: ``agybridge attach`` (a byte
relay between stdio and the daemon's socket), ``status`` and ``stop``.

Everything here imports the standard library only (no trio, attrs, cattrs):
an editor starts ``attach`` for every agent session, so its start-up is the
user's wait (tests/test_daemon_light.py checks the imports).
"""
