"""Settings: defaults, then a TOML file, then environment variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannrt.config import load_settings


def test_the_chip_preset_from_the_environment_keeps_the_file_s_chip_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "cannrt.toml"
    config.write_text('[chip]\npreset = "Ascend910B1"\ndisabled_cores = [3]\n')
    monkeypatch.setenv("CANNRT_CHIP", "Ascend910B4")
    settings = load_settings(config)
    assert settings.chip.name == "Ascend910B4"
    assert settings.chip.disabled_cores == (3,)
    assert settings.chip.usable_cores(False) == settings.chip.aicore_count - 1


def test_an_unknown_setting_is_named(tmp_path: Path) -> None:
    config = tmp_path / "cannrt.toml"
    config.write_text("[chip]\nwarp_drive = 1\n")
    with pytest.raises(ValueError, match="warp_drive"):
        load_settings(config)
