"""The command probe's training (venus_ros.training.command_probe), on a small draw."""

from __future__ import annotations

from pathlib import Path

import pytest

from venus_ros.audio.asr import PhraseProbe
from venus_ros.eval.synth import BACKCHANNELS
from venus_ros.text.commands import COMMAND_PHRASES, command_of
from venus_ros.training.command_probe import (
    OTHER_SHORT,
    PROBE_NAME,
    command_forms,
    train_command_probe,
)


def test_the_probe_data_are_commands_against_short_things_that_are_not() -> None:
    forms = command_forms()
    assert set(COMMAND_PHRASES) <= set(forms) and len(forms) > 2 * len(COMMAND_PHRASES)
    assert all(command_of(f) is not None for f in forms)
    assert not any(command_of(o) for o in (*BACKCHANNELS, *OTHER_SHORT))


def test_a_probe_trained_on_one_rendering_per_phrase_is_written_and_orders_its_data(
    tmp_path: Path,
) -> None:
    pytest.importorskip("faster_whisper")
    report = train_command_probe(tmp_path, seed=3, repeats=1)
    probe = PhraseProbe.load(tmp_path / PROBE_NAME)
    assert probe.model == "tiny.en" and probe.tells(COMMAND_PHRASES)
    assert report["samples"] == len(command_forms()) + len(BACKCHANNELS) + len(OTHER_SHORT)
    assert 0.5 <= probe.bar <= 1.0 and report["held_out_fire"] <= 0.05
    assert report["fit_auc"] > 0.95  # the fit orders commands above the rest
    assert "bar" in (tmp_path / "command_probe_report.md").read_text()
