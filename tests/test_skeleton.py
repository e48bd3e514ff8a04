"""The package imports and exposes its version."""

from __future__ import annotations

import cannrt


def test_package_has_version() -> None:
    assert cannrt.__version__.count(".") == 2
