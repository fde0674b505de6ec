"""The ``venus`` frontend on the CPU stand-in checkpoint (torch + transformers, no GPU).

The stand-in (``venus_ros.frontends.venus.standin``) is a checkpoint folder built here: random
weights from a config, remote code implementing MiniCPM-o 4.5's duplex entry points, and a
reply plan instead of learned behaviour. It is loaded through transformers' real
``trust_remote_code`` path and played through the real duplex loop and evaluation runner.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from venus_ros.core.clock import FakeClock
from venus_ros.core.duplex import DelegateRequest
from venus_ros.core.frontend import Decision, FrontendError
from venus_ros.core.session import run_offline
from venus_ros.core.timeline import Kind, Record
from venus_ros.core.units import InputUnit, VideoFrame
from venus_ros.frontends import make_frontend
from venus_ros.frontends.venus import VenusFrontend, VenusOptions, parse_venus_spec
from venus_ros.frontends.venus.checkpoint import (
    CheckpointInfo,
    check_versions,
    inspect_checkpoint,
)

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from venus_ros.frontends.venus.standin import STANDIN_TOKEN_IDS, build_standin_checkpoint  # noqa: E402

RATE = 16000
QUERY = "weather in Paris today"
BACKEND = "It is sunny and 21 degrees in Paris."


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_standin_checkpoint(tmp_path_factory.mktemp("venus") / "standin")


def _mic(total_s: float, loud: list[tuple[float, float]], seed: int = 0) -> np.ndarray:
    """Silence with noise bursts standing in for the user's speech."""
    rng = np.random.default_rng(seed)
    audio = np.zeros(round(total_s * RATE), np.float32)
    for start, end in loud:
        a, b = round(start * RATE), round(end * RATE)
        audio[a:b] = rng.normal(0.0, 0.1, b - a).astype(np.float32)
    return audio


def _of(records: list[Record], kind: Kind) -> list[Record]:
    return [r for r in records if r.kind is kind]


def test_spec_options_are_typed_and_checked() -> None:
    path, options = parse_venus_spec("~/ckpt, device=cpu, speak_tokens=12, variant=audio")
    assert path == Path("~/ckpt").expanduser()
    assert options == VenusOptions(device="cpu", speak_tokens=12, variant="audio")
    for bad in ("", "ckpt,devcie=cpu", "ckpt,dtype=int3", "ckpt,speak_tokens=0", "ckpt,cpu"):
        with pytest.raises(FrontendError, match="venus"):
            parse_venus_spec(bad)


def test_missing_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FrontendError, match="no checkpoint folder"):
        make_frontend(f"venus:{tmp_path / 'absent'}")
    with pytest.raises(FrontendError, match=r"no config\.json"):
        make_frontend(f"venus:{tmp_path}")
    (tmp_path / "config.json").write_text('{"model_type": "qwen3"}', encoding="utf-8")
    with pytest.raises(FrontendError, match="auto_map"):
        make_frontend(f"venus:{tmp_path}")


def test_upstream_pins_are_checked_before_loading(tmp_path: Path) -> None:
    folder = build_standin_checkpoint(tmp_path / "minicpmo", model_type="minicpmo")
    info = inspect_checkpoint(folder)
    assert info.pins == {"transformers": "==4.51.0", "torch": ">=2.3,<=2.8"}
    check_versions(info, {"transformers": "4.51.0", "torch": "2.8.0+cu128"})
    with pytest.raises(FrontendError, match=r"torch 2\.9\.1 is installed.*<=2\.8"):
        check_versions(info, {"transformers": "4.51.0", "torch": "2.9.1"})
    with pytest.raises(FrontendError, match="transformers is not installed"):
        check_versions(info, {"transformers": None, "torch": "2.8.0"})
    # this environment has transformers 5.x: the real check refuses, naming the way out
    with pytest.raises(FrontendError, match=r"==4\.51\.0.*venus_gpu_env\.sh"):
        make_frontend(f"venus:{folder}")


def _big_checkpoint(folder: Path, parameters: int) -> Path:
    """A folder whose safetensors header describes ``parameters`` bf16 weights (no data)."""
    folder.mkdir()
    config = {"model_type": "venus_standin", "auto_map": {"AutoModel": "m.M"}}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    header = json.dumps(
        {"w": {"dtype": "BF16", "shape": [parameters // 4096, 4096], "data_offsets": [0, 0]}}
    ).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    return folder


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_no_cuda_for_a_9b_checkpoint_says_what_to_expect(tmp_path: Path) -> None:
    folder = _big_checkpoint(tmp_path / "big", 8_700_000_000)
    assert inspect_checkpoint(folder).parameters == 8_700_000_000 // 4096 * 4096
    with pytest.raises(FrontendError, match=r"no CUDA device.*~\d+ s per 1 s unit.*device=cpu"):
        make_frontend(f"venus:{folder}")
    with pytest.raises(FrontendError, match="sees no CUDA device"):
        make_frontend(f"venus:{folder},device=cuda")


def test_memory_needs_a_checkpoint_that_has_it(checkpoint: Path) -> None:
    assert parse_venus_spec("x,memory=30")[1].memory == 30
    with pytest.raises(FrontendError, match="no long-video memory"):
        make_frontend(f"venus:{checkpoint},memory=5")


def test_checkpoint_reads_protocol_tokens(checkpoint: Path) -> None:
    info = inspect_checkpoint(checkpoint)
    assert isinstance(info, CheckpointInfo) and info.can_delegate
    assert info.token_ids["<|listen|>"] == 151705 and info.token_ids["<|turn_eos|>"] == 151717
    assert 10_000 < info.parameters < 1_000_000 and info.pins == {}


def test_text_comes_from_generated_ids_with_spans_closed(checkpoint: Path) -> None:
    frontend = make_frontend(f"venus:{checkpoint}")
    assert isinstance(frontend, VenusFrontend)
    tok = frontend.tokenizer
    ids = tok.encode("<|speak|>Hi <delegate>look it up<|turn_eos|>")
    assert frontend.decode_ids(ids) == "Hi <delegate>look it up</delegate><|turn_eos|>"
    assert frontend.decode_ids(tok.encode("<unit><|chunk_eos|>ok")) == "ok"
    frontend.close()


def test_duplex_loop_delegates_privately_and_speaks_the_backend_reply(checkpoint: Path) -> None:
    frontend = make_frontend(f"venus:{checkpoint}")
    asked: list[DelegateRequest] = []

    def harness(request: DelegateRequest) -> tuple[float, str]:
        asked.append(request)
        return 0.5, BACKEND

    frames = [VideoFrame(np.full((48, 64, 3), 20 * i, np.uint8), t=float(i)) for i in range(12)]
    session = run_offline(
        _mic(14.0, [(0.2, 1.8)]),
        RATE,
        frontend,
        clock=FakeClock(),
        frames=frames,
        on_delegate=harness,
    )
    records = list(session.timeline.snapshot())
    decisions = [r.decision for r in session.results]
    assert decisions[:2] == [Decision.LISTEN, Decision.LISTEN]
    assert Decision.SPEAK in decisions and decisions[-1] is Decision.LISTEN
    # the private span was captured, with its cutoff, and never reached speech
    assert [d.query for d in asked] == [QUERY]
    spoken = "".join(r.payload["text"] for r in _of(records, Kind.ASSISTANT_TEXT))
    assert "Let me check." in spoken and "One moment." in spoken
    assert "Paris today" not in spoken and "delegate" not in spoken
    assert not _of(records, Kind.PROTOCOL_ERROR) and not _of(records, Kind.FRONTEND_ERROR)
    # the reply went in at a listening boundary and was voiced, then acknowledged as heard
    inserts = _of(records, Kind.BACKEND_INSERT)
    assert len(inserts) == 1 and inserts[0].payload["inserted"]
    insert_unit = inserts[0].payload["unit"]
    assert session.results[insert_unit - 1].end_of_turn or decisions[insert_unit - 1] is (
        Decision.LISTEN
    )
    assert "sunny and 21 degrees" in spoken
    audio = _of(records, Kind.ASSISTANT_AUDIO)
    assert audio and {r.payload["sample_rate"] for r in audio} == {24000}
    assert _of(records, Kind.PLAYBACK_ACK)
    heard = session.loop.heard_text()
    assert "Let me check." in heard and "sunny" in heard and "Paris today" not in heard
    states = [r.payload.get("outcome") for r in _of(records, Kind.DELIVERY)]
    assert "delivered" in states, states
    assert len(_of(records, Kind.VIDEO_FRAME)) >= 10  # frames reached the model's prefill
    assert frontend.filters_delegate_audio and frontend.muted_units == 0
    frontend.close()


def test_units_touching_a_span_are_muted_when_the_model_voices_spans(tmp_path: Path) -> None:
    folder = build_standin_checkpoint(tmp_path / "legacy", filter_delegate_audio=False)
    frontend = make_frontend(f"venus:{folder}")
    assert isinstance(frontend, VenusFrontend) and not frontend.filters_delegate_audio
    session = run_offline(_mic(8.0, [(0.2, 1.8)]), RATE, frontend, clock=FakeClock())
    records = list(session.timeline.snapshot())
    closes = _of(records, Kind.DELEGATE_CLOSE)
    assert [r.payload["query"] for r in closes] == [QUERY]
    opened = _of(records, Kind.DELEGATE_OPEN)[0].payload["unit"]
    voiced = {r.payload["unit"] for r in _of(records, Kind.ASSISTANT_AUDIO)}
    assert not voiced & set(range(opened, closes[0].payload["unit"] + 1))
    assert frontend.muted_units == closes[0].payload["unit"] - opened + 1
    assert voiced  # the units around the span still speak
    frontend.close()


def test_a_barge_in_makes_it_yield_audibly(tmp_path: Path) -> None:
    long = "This is a long answer that goes on and on for several seconds of speech."
    folder = build_standin_checkpoint(tmp_path / "talker", replies=[long])
    frontend = make_frontend(f"venus:{folder}")
    session = run_offline(_mic(8.0, [(0.2, 1.5), (3.1, 5.0)]), RATE, frontend, clock=FakeClock())
    records = list(session.timeline.snapshot())
    flushes = _of(records, Kind.FLUSH)
    assert len(flushes) == 1, [r.decision.value for r in session.results]
    spoken = "".join(r.payload["text"] for r in _of(records, Kind.ASSISTANT_TEXT))
    assert spoken and long.startswith(spoken) and spoken != long
    frontend.close()


def test_prefill_feeds_backend_text_to_the_model(checkpoint: Path) -> None:
    frontend = make_frontend(f"venus:{checkpoint}")
    frontend.prepare()
    before = len(frontend.duplex.total_ids)
    unit = InputUnit(0, 0, np.zeros(16560, np.float32), texts=(f"<backend>{BACKEND}</backend>",))
    frontend.prefill(unit)
    added = frontend.duplex.total_ids[before:]
    assert STANDIN_TOKEN_IDS["<backend>"] in added and STANDIN_TOKEN_IDS["</backend>"] in added
    out = frontend.generate()
    assert out.decision is Decision.SPEAK and out.text == BACKEND[:20]
    assert out.audio.dtype == np.float32 and out.audio.shape == (20 * 960,)
    frontend.close()


def test_evaluation_runner_plays_a_sample_through_it(checkpoint: Path, tmp_path: Path) -> None:
    from venus_ros.eval.runner import run_sample
    from venus_ros.eval.scenario import load_suite, write_sample

    write_sample(
        tmp_path,
        "delegate",
        _mic(8.0, [(0.3, 1.6)]),
        RATE,
        {
            "category": "delegation",
            "turns": [{"start": 0.3, "end": 1.6, "text": "what is the weather in Paris"}],
            "needs_delegation": True,
            "tools": [],
        },
    )
    (sample,) = load_suite(tmp_path).samples
    run = run_sample(sample, f"venus:{checkpoint}")
    assert run.error == "", run.error
    assert run.delegations == (QUERY,)
    assert run.played_rate == 24000 and np.abs(run.played).max() > 0
    assert len(run.unit_compute_s) >= 8
