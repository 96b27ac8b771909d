"""``python -m funcdiff``: the command line (see :mod:`funcdiff.cli`)."""

from funcdiff.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
