"""agybridge: an ACP agent that supervises Google's Antigravity CLI (agy)."""

__version__ = "0.1.0"
