"""share_path finds config/ in a checkout and in an install prefix (colcon, distro, venv)."""

from pathlib import Path

import pytest

from venus_ros import paths


@pytest.mark.parametrize(
    "site", ["lib/python3.12/site-packages", "local/lib/python3.10/dist-packages"]
)
def test_share_path_in_an_install_prefix(tmp_path: Path, monkeypatch, site: str) -> None:
    prefix = tmp_path / "install" / "venus_ros"
    package = prefix / site / "venus_ros"
    package.mkdir(parents=True)
    config = prefix / "share" / "venus_ros" / "config" / "venus.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("{}\n")
    monkeypatch.setattr(paths, "__file__", str(package / "paths.py"))
    monkeypatch.setattr(paths, "_SOURCE_ROOT", package.parent)
    assert paths.share_path("config/venus.yaml") == config
    with pytest.raises(FileNotFoundError, match=r"nope\.yaml not found"):
        paths.share_path("config/nope.yaml")


def test_share_path_in_the_checkout() -> None:
    assert paths.share_path("config/venus.yaml") == paths._SOURCE_ROOT / "config" / "venus.yaml"
