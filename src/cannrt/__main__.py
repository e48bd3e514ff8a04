"""`python -m cannrt` runs the command-line interface."""

from __future__ import annotations

from cannrt.cli.app import main

if __name__ == "__main__":
    main()
