"""Full-Duplex-Bench layouts: our --fdb-out folders scored by FDB's timing logic (as we
reimplemented it from get_timing.py) agree with our metrics; FDB v1.5 and v1 folders load as
they are; the CLI runs an FDB suite and writes the export."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from venus_ros.cli import main
from venus_ros.eval.fdb import is_fdb_suite, load_any_suite, load_fdb_suite
from venus_ros.eval.judge import WhisperTranscriber
from venus_ros.eval.metrics import compute_metrics
from venus_ros.eval.runner import export_fdb, run_suite
from venus_ros.eval.scenario import ScenarioError
from venus_ros.eval.synth import synthesize
from venus_ros.eval.timing import double_talk, merge_segments, response_gaps, speech_segments

FDB_FILES = {
    "input.wav",
    "clean_input.wav",
    "output.wav",
    "clean_output.wav",
    "metadata.json",
    "input.json",
    "clean_input.json",
    "output.json",
    "clean_output.json",
}


def fdb_process_folder(folder: Path) -> dict[str, list[list[float]]]:
    """What FDB's get_timing.py computes for one folder, step by step as it does: read
    input.wav and output.wav, resample to 16 kHz, Silero VAD, merge user gaps <= 0.6 s and model
    gaps <= 0.5 s, then latency_stop_list and latency_resp_list."""

    def segments(name: str, gap: float) -> list[tuple[float, float]]:
        audio, rate = sf.read(str(folder / name), dtype="float32", always_2d=True)
        return merge_segments(speech_segments(audio[:, 0], rate, "silero"), gap)

    user, model = segments("input.wav", 0.6), segments("output.wav", 0.5)
    return {
        "latency_stop_list": [list(x) for x in double_talk(user, model)],
        "latency_resp_list": [list(x) for x in response_gaps(user, model)],
    }


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("fdb")
    suite = synthesize(
        root / "suite", 1, 21, ["interruption", "pause"], voices="espeak", compact=True
    )
    runs = run_suite(suite, "vad-bargein")
    metrics = compute_metrics(runs, "vad-bargein")
    folders = export_fdb(suite, runs, "vad-bargein", root / "out", WhisperTranscriber())
    return suite, metrics, folders, root / "out"


def test_the_export_has_fdbs_files_and_layout(exported) -> None:
    suite, _, folders, out = exported
    assert sorted(f.parent.name for f in folders) == ["pause_handling", "user_interruption"]
    interruption = out / "user_interruption" / "interruption_000"
    assert {p.name for p in interruption.iterdir()} == FDB_FILES
    meta = json.loads((interruption / "metadata.json").read_text(encoding="utf-8"))
    sample = suite.by_category("interruption")[0]
    assert meta["timestamps"] == list(sample.overlap)
    assert meta["current_turn_text"] == sample.turns[0].text
    assert meta["context_text"] == sample.assistant_turns[0].text
    output = json.loads((interruption / "output.json").read_text(encoding="utf-8"))
    assert set(output) == {"text", "chunks"} and output["chunks"]
    chunk = output["chunks"][0]
    assert set(chunk) == {"text", "timestamp"} and chunk["timestamp"][0] < chunk["timestamp"][1]
    # time-synchronous channels: 16 kHz, the output at least as long as the input
    info_in, info_out = (
        sf.info(str(interruption / "input.wav")),
        sf.info(str(interruption / "output.wav")),
    )
    assert info_in.samplerate == info_out.samplerate == 16000
    assert info_out.frames >= info_in.frames
    # the clean run (no overlap event) talks through where the overlap was
    clean, _ = sf.read(str(interruption / "clean_output.wav"), dtype="float32")
    noisy, _ = sf.read(str(interruption / "output.wav"), dtype="float32")
    after = slice(round((sample.overlap[1] + 1.5) * 16000), round((sample.overlap[1] + 3) * 16000))
    assert np.abs(clean[after]).max() > np.abs(noisy[after]).max()
    pause = json.loads((out / "pause_handling" / "pause_000" / "pause.json").read_text("utf-8"))
    assert pause[0]["text"] == "[PAUSE]" and len(pause[0]["timestamp"]) == 2


def test_fdb_timing_on_the_exported_files_matches_our_metrics(exported) -> None:
    _, metrics, folders, _ = exported
    rows = {r["id"]: r for r in metrics["per_sample"]}
    for folder in folders:
        theirs = fdb_process_folder(folder)
        ours = rows[folder.name]
        for key in ("latency_stop_list", "latency_resp_list"):
            assert len(theirs[key]) == len(ours[key]), (folder.name, key, theirs, ours)
            for (a1, b1), (a2, b2) in zip(theirs[key], ours[key], strict=True):
                assert abs(a1 - a2) <= 0.05 and abs(b1 - b2) <= 0.05, (folder.name, key)
    row = rows["interruption_000"]
    assert row["fdb_stop_s"] is not None and row["fdb_stop_s"] > 0


def test_the_export_loads_back_as_an_fdb_v15_suite(exported) -> None:
    suite, _, _, out = exported
    assert is_fdb_suite(out)
    loaded = load_any_suite(out)
    back = {s.id: s for s in loaded.samples}
    original = suite.by_category("interruption")[0]
    sample = back["user_interruption.interruption_000"]
    assert sample.category == "interruption" and sample.expected == "respond"
    assert sample.overlap == original.overlap
    assert sample.turns[0].text == original.turns[0].text
    assert sample.extra["fdb"] == {"version": "1.5", "subset": "user_interruption"}
    assert sample.clean_path.is_file() and sample.assistant_turns == ()
    assert back["pause_handling.pause_000"].category == "pause"
    only = load_any_suite(out, ["pause"])
    assert [s.category for s in only.samples] == ["pause"]


def _wav(folder: Path, seconds: float = 3.0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    t = np.arange(round(seconds * 16000)) / 16000
    sf.write(str(folder / "input.wav"), 0.2 * np.sin(2 * np.pi * 200 * t), 16000)


def test_fdb_v15_subsets_and_v1_task_files_load_without_conversion(tmp_path: Path) -> None:
    root = tmp_path / "v1_5"
    for subset in (
        "user_interruption",
        "user_backchannel",
        "talking_to_other",
        "background_speech",
    ):
        folder = root / subset / "7"
        _wav(folder)
        meta = {
            "context_text": "Tell me about Rome.",
            "current_turn_text": "uh-huh",
            "timestamps": [1.25, 1.75],
        }
        (folder / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    suite = load_fdb_suite(root)
    assert {s.id: s.category for s in suite.samples} == {
        "background_speech.7": "background",
        "talking_to_other.7": "other_directed",
        "user_backchannel.7": "backchannel",
        "user_interruption.7": "interruption",
    }
    assert all(s.extra["context_text"] == "Tell me about Rome." for s in suite.samples)
    # one subset folder given directly
    assert [s.id for s in load_any_suite(root / "user_backchannel").samples] == [
        "user_backchannel.7"
    ]
    v1 = tmp_path / "v1"
    _wav(v1 / "candor_pause_handling" / "1")
    (v1 / "candor_pause_handling" / "1" / "pause.json").write_text(
        json.dumps([{"text": "[PAUSE]", "timestamp": [1.0, 1.8]}]), encoding="utf-8"
    )
    _wav(v1 / "synthetic_user_interruption" / "2")
    (v1 / "synthetic_user_interruption" / "2" / "interrupt.json").write_text(
        json.dumps(
            [
                {
                    "context": "Suggest a book.",
                    "interrupt": "Fiction, please.",
                    "timestamp": [1.5, 2.5],
                }
            ]
        ),
        encoding="utf-8",
    )
    _wav(v1 / "candor_turn_taking" / "3")
    (v1 / "candor_turn_taking" / "3" / "turn_taking.json").write_text(
        json.dumps([{"text": "[TURN-TAKING]", "timestamp": [2.0, 2.4]}]), encoding="utf-8"
    )
    samples = {s.category: s for s in load_any_suite(v1).samples}
    assert samples["pause"].extra["pause"] == [[1.0, 1.8]]
    assert samples["interruption"].overlap == (1.5, 2.5)
    assert samples["interruption"].turns[0].text == "Fiction, please."
    assert samples["turn_taking"].turns[-1].end == 2.0


def test_broken_fdb_folders_are_named_in_the_error(tmp_path: Path) -> None:
    folder = tmp_path / "user_interruption" / "9"
    _wav(folder)
    (folder / "metadata.json").write_text(
        json.dumps({"current_turn_text": "hi", "timestamps": [2.0]}), encoding="utf-8"
    )
    with pytest.raises(ScenarioError, match=r"user_interruption\.9.*timestamps"):
        load_fdb_suite(tmp_path)
    (folder / "metadata.json").write_text(
        json.dumps({"current_turn_text": "hi", "timestamps": [2.0, 9.0]}), encoding="utf-8"
    )
    # 9.0 s is past the end of the 3 s input
    with pytest.raises(ScenarioError, match="past the end"):
        load_fdb_suite(tmp_path)


def test_the_cli_scores_an_fdb_folder_and_writes_the_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = synthesize(tmp_path / "s", 1, 5, ["backchannel"], voices="espeak", compact=True)
    (sample,) = suite.samples
    folder = tmp_path / "fdb" / "user_backchannel" / "1"
    folder.mkdir(parents=True)
    (folder / "input.wav").write_bytes(sample.input_path.read_bytes())
    meta = {
        "context_text": "",
        "current_turn_text": sample.turns[0].text,
        "timestamps": list(sample.overlap),
    }
    (folder / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    out = tmp_path / "export"
    code = main(
        [
            "eval",
            "run",
            "--scenarios",
            str(tmp_path / "fdb"),
            "--frontend",
            "never-yield",
            "--judge",
            "none",
            "--fdb-out",
            str(out),
            "--no-progress",
            "--json",
            str(tmp_path / "m.json"),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "wrote 1 FDB sample folders" in printed and "acoustic labels" in printed
    assert (out / "user_backchannel" / "user_backchannel.1" / "output.wav").is_file()
    metrics = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))
    assert metrics["n_samples"] == 1 and metrics["overlap_basis"] == "acoustic"
    assert (
        main(
            [
                "eval",
                "run",
                "--scenarios",
                str(tmp_path / "fdb"),
                "--frontend",
                "never-yield",
                "--judge",
                "gpt",
            ]
        )
        == 2
    )
