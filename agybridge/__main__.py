"""``python -m agybridge``: the same as the ``agybridge`` command."""

from .cli import main

if __name__ == "__main__":
    main()
