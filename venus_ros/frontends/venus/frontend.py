"""The Realtime-Venus / MiniCPM-o 4.5 duplex API behind our frontend contract.

:class:`VenusFrontend` drives a *duplex object* (``model.as_duplex()`` of a checkpoint loaded
with transformers ``trust_remote_code``) one unit at a time, with the calls and keywords of the
public examples (MiniCPM-o README "Duplex Omni Mode", Realtime-Venus
``frontend/Realtime-Venus-Omni/duplex_chat.py`` and ``demos/model/adapter.py``)::

    duplex.prepare(prefix_system_prompt=..., ref_audio=..., prompt_wav_path=...)
    duplex.streaming_prefill(audio_waveform=<16 kHz float32>, frame_list=[PIL] | None,
                             text_list=["<backend>...</backend>"] | None)
    result = duplex.streaming_generate(prompt_wav_path=..., max_new_speak_tokens_per_chunk=20,
                                       decode_mode="sampling")
    result["is_listen"], result["text"], result["end_of_turn"], result["audio_waveform"]

Mapping onto :class:`~venus_ros.core.frontend.UnitOutput`:

* ``is_listen`` -> ``LISTEN``, else ``SPEAK``; ``end_of_turn`` -> ``end_of_turn`` (with no speech
  in the unit the duplex loop treats it as a yield and flushes the speaker);
* the text is rebuilt from the token ids the unit generated (``duplex.total_ids`` grows by
  them), decoded *with* special tokens, because ``result["text"]`` drops them and would let a
  ``<delegate>`` query reach speech as plain words. Layout tokens (``<|speak|>``,
  ``<|listen|>``, ``<|chunk_eos|>``, ``<unit>``, ``<image>`` and their closers) are removed;
  ``<delegate>``, ``</delegate>`` and ``<|turn_eos|>`` are kept for the duplex loop's span
  parser, which keeps private spans out of speech. A delegate that the model ends with
  ``<|turn_eos|>`` instead of ``</delegate>`` (the released checkpoints may) is closed before
  the ``<|turn_eos|>``. Without ``total_ids`` (another duplex implementation) ``result["text"]``
  is used as it is;
* ``audio_waveform`` (24 kHz, numpy or torch) -> mono float32 ``audio``; the duplex loop hands it
  to the speaker and counts only what playback acknowledges as heard.

``<backend>`` replies arrive in ``unit.texts`` (inserted by the loop at eligible boundaries) and
go to ``streaming_prefill(text_list=...)``, as Realtime-Venus injects them.

:func:`load_venus_frontend` loads a checkpoint folder (:mod:`.checkpoint` checks it first) and
:func:`make_venus_frontend` reads the ``venus:PATH[,OPTION...]`` spec.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from venus_ros.core.frontend import (
    DEFAULT_OUTPUT_RATE,
    Decision,
    Frontend,
    FrontendError,
    UnitOutput,
)
from venus_ros.core.units import InputUnit
from venus_ros.frontends.venus.checkpoint import (
    PASSES_PER_UNIT,
    CheckpointInfo,
    check_versions,
    expected_unit_seconds,
    inspect_checkpoint,
    known_token_mismatches,
)

__all__ = [
    "LAYOUT_TOKENS",
    "VenusFrontend",
    "VenusOptions",
    "load_venus_frontend",
    "make_venus_frontend",
    "parse_venus_spec",
]

_LOG = logging.getLogger(__name__)

#: Tokens that only lay out the stream; never text for the span parser.
LAYOUT_TOKENS: tuple[str, ...] = (
    "<|speak|>",
    "<|listen|>",
    "<|chunk_eos|>",
    "<unit>",
    "</unit>",
    "<image>",
    "</image>",
)
_KEPT_TOKENS = ("<delegate>", "</delegate>", "<backend>", "</backend>", "<|turn_eos|>")

#: Checkpoints above this many parameters are refused on CPU unless ``device=cpu`` is explicit.
CPU_PARAMETER_LIMIT = 1_000_000_000


class VenusFrontend(Frontend):
    """A duplex object driven through the frontend contract.

    Args:
        duplex: the object ``model.as_duplex()`` returned (or anything with its methods).
        tokenizer: decodes generated ids (``decode(ids, skip_special_tokens=False)`` and
            ``convert_tokens_to_ids``); default ``duplex.tokenizer``. Without one (or without
            ``duplex.total_ids``) the text is ``result["text"]``.
        speak_tokens: ``max_new_speak_tokens_per_chunk`` (20 upstream).
        decode_mode: ``"sampling"`` (upstream default) or ``"greedy"``.
        send_frames: pass camera frames (False for the audio-only checkpoint).
        ref_audio: 16 kHz voice reference for ``prepare`` when the caller gives none.
        prompt_wav_path: the same reference as a file, for the remote code's TTS.
        output_sample_rate: rate of ``audio_waveform`` (24 kHz for MiniCPM-o 4.5).
    """

    def __init__(
        self,
        duplex: Any,
        *,
        tokenizer: Any | None = None,
        speak_tokens: int = 20,
        decode_mode: str = "sampling",
        send_frames: bool = True,
        ref_audio: np.ndarray | None = None,
        prompt_wav_path: str | None = None,
        output_sample_rate: int = DEFAULT_OUTPUT_RATE,
    ) -> None:
        if speak_tokens < 1:
            raise ValueError(f"speak_tokens must be >= 1, got {speak_tokens}")
        self.duplex = duplex
        self.tokenizer = tokenizer if tokenizer is not None else getattr(duplex, "tokenizer", None)
        self.speak_tokens = speak_tokens
        self.decode_mode = decode_mode
        self.send_frames = send_frames
        self.ref_audio = ref_audio
        self.prompt_wav_path = prompt_wav_path
        self.output_sample_rate = output_sample_rate
        self._ids: dict[int, str] = self._token_table()
        #: The model keeps ``<delegate>`` spans out of its own speech (released Realtime-Venus);
        #: otherwise the audio of every unit that touches a span is dropped here.
        self.filters_delegate_audio = _filters_delegate_audio(duplex)
        #: Units whose audio was dropped because it may voice a private span.
        self.muted_units = 0
        if self._total_ids() is None:
            _LOG.warning(
                "venus: the duplex object exposes no total_ids/tokenizer: text comes from "
                "result['text'], where <delegate> tags may be missing"
            )
        self._mark: int | None = None
        self._in_delegate = False
        self._prefilled = False
        self._sessions = 0
        #: Seconds spent in streaming_prefill and streaming_generate for each unit.
        self.unit_seconds: list[tuple[float, float]] = []

    def _token_table(self) -> dict[int, str]:
        """``{id: token}`` for the special tokens this frontend handles by id."""
        convert = getattr(self.tokenizer, "convert_tokens_to_ids", None)
        if convert is None:
            return {}
        table = {}
        for token in (*LAYOUT_TOKENS, *_KEPT_TOKENS):
            token_id = convert(token)
            if isinstance(token_id, int) and token_id >= 0:
                table[token_id] = token
        return table

    def _total_ids(self) -> Sequence[int] | None:
        official = getattr(self.duplex, "official_duplex", self.duplex)
        ids = getattr(official, "total_ids", None)
        return ids if ids is not None and self.tokenizer is not None and self._ids else None

    def prepare(self, system_prompt: str = "", ref_audio: np.ndarray | None = None) -> None:
        """``duplex.prepare``; an empty prompt keeps the checkpoint's own system prompt.

        A second session on the same duplex object first resets the Realtime-Venus memory
        runtime where there is one (its ``prepare`` is single-use per session).
        """
        runtime = getattr(self.duplex, "memory_runtime", None)
        if self._sessions and callable(getattr(runtime, "reset_memory", None)):
            runtime.reset_memory()
        self._sessions += 1
        self.duplex.prepare(
            prefix_system_prompt=system_prompt or None,
            ref_audio=ref_audio if ref_audio is not None else self.ref_audio,
            prompt_wav_path=self.prompt_wav_path,
        )
        self._mark = None
        self._in_delegate = False
        self._prefilled = False

    def prefill(self, unit: InputUnit) -> None:
        """``streaming_prefill`` with the unit's audio, newest frame and injected texts."""
        frames = None
        if self.send_frames and unit.frame is not None:
            from PIL import Image

            frames = [Image.fromarray(np.asarray(unit.frame.image)).convert("RGB")]
        t0 = time.perf_counter()
        self.duplex.streaming_prefill(
            audio_waveform=np.array(unit.audio, dtype=np.float32),
            frame_list=frames,
            text_list=list(unit.texts) or None,
        )
        self._prefill_s = time.perf_counter() - t0
        ids = self._total_ids()
        self._mark = len(ids) if ids is not None else None
        self._prefilled = True

    def generate(self) -> UnitOutput:
        """``streaming_generate``, mapped onto a :class:`UnitOutput`."""
        if not self._prefilled:
            raise FrontendError("venus: generate() called before prefill()")
        self._prefilled = False
        t0 = time.perf_counter()
        result = self.duplex.streaming_generate(
            prompt_wav_path=self.prompt_wav_path,
            max_new_speak_tokens_per_chunk=self.speak_tokens,
            decode_mode=self.decode_mode,
        )
        self.unit_seconds.append((self._prefill_s, time.perf_counter() - t0))
        if not isinstance(result, Mapping) or "is_listen" not in result:
            raise FrontendError(f"venus: streaming_generate returned {type(result).__name__}")
        was_inside = self._in_delegate
        text = self._unit_text(result)
        end = bool(result.get("end_of_turn"))
        if result["is_listen"]:
            return UnitOutput(Decision.LISTEN, end_of_turn=end)
        audio = _mono_float32(result.get("audio_waveform"))
        private = was_inside or self._in_delegate or "<delegate>" in text
        if private and audio.size and not self.filters_delegate_audio:
            audio = np.zeros(0, dtype=np.float32)  # it may voice the query: never play it
            self.muted_units += 1
        if end:
            self._in_delegate = False
        return UnitOutput(Decision.SPEAK, text=text, audio=audio, end_of_turn=end)

    def _unit_text(self, result: Mapping[str, Any]) -> str:
        ids = self._total_ids()
        if ids is None or self._mark is None:
            return str(result.get("text") or "")
        return self.decode_ids(ids[self._mark :])  # the tail only: total_ids grows all session

    def decode_ids(self, ids: Sequence[int]) -> str:
        """Text of generated ids for the span parser (layout tokens out, spans closed)."""
        parts: list[str] = []
        run: list[int] = []

        def flush() -> None:
            if run:
                parts.append(self.tokenizer.decode(run, skip_special_tokens=False))
                run.clear()

        for raw in ids:
            token = self._ids.get(int(raw))
            if token is None:
                run.append(int(raw))
                continue
            flush()
            if token in LAYOUT_TOKENS:
                continue
            if token == "<delegate>":
                self._in_delegate = True
            elif token == "</delegate>":
                self._in_delegate = False
            elif token == "<|turn_eos|>" and self._in_delegate:
                parts.append("</delegate>")
                self._in_delegate = False
            parts.append(token)
        flush()
        return "".join(parts)

    def close(self) -> None:
        """Leave duplex mode (``as_simplex``), which frees the session's KV cache."""
        as_simplex = getattr(self.duplex, "as_simplex", None)
        if callable(as_simplex):
            try:
                as_simplex()
            except Exception:  # a failing release must not hide the session's own result
                _LOG.warning("venus: as_simplex() failed on close", exc_info=True)


def _filters_delegate_audio(duplex: Any) -> bool:
    """Whether the checkpoint's own speech leaves ``<delegate>`` spans out.

    An explicit ``delegate_audio_filtered`` attribute decides; otherwise the released
    Realtime-Venus remote code is recognised by its span-filter state (the flags the public
    Realtime-Venus serving adapter checks).
    """
    official = getattr(duplex, "official_duplex", duplex)
    declared = getattr(official, "delegate_audio_filtered", None)
    if declared is not None:
        return declared is True
    return (
        callable(getattr(official, "_convert_results_to_tts_input", None))
        and type(getattr(official, "_delegate_tts_skip", None)) is bool
        and type(getattr(official, "_delegate_turn_preflushed", None)) is bool
    )


def _mono_float32(wave: Any) -> np.ndarray:
    """A numpy or torch waveform (any shape) as mono float32; empty for None."""
    if wave is None:
        return np.zeros(0, dtype=np.float32)
    if hasattr(wave, "detach"):  # a torch tensor, without importing torch here
        wave = wave.detach().float().cpu().numpy()
    return np.asarray(wave, dtype=np.float32).reshape(-1)


@dataclass(frozen=True)
class VenusOptions:
    """Options of ``venus:PATH[,OPTION...]``.

    Attributes:
        device: ``auto`` (CUDA when present, else CPU for small checkpoints), ``cuda``,
            ``cuda:N`` or ``cpu``.
        dtype: ``auto`` (bf16 on CUDA, fp32 on CPU), ``bf16``, ``fp16`` or ``fp32``.
        attn: ``sdpa``, ``flash_attention_2`` or ``eager``.
        variant: ``omni`` (vision, audio and speech) or ``audio`` (Realtime-Venus-Audio:
            ``init_vision=False``, ``as_duplex(generate_audio=True)``, no frames sent).
        speak_tokens: speak tokens per unit (``max_new_speak_tokens_per_chunk``).
        decode: ``sampling`` or ``greedy``.
        ref_audio: a WAV file of the voice to clone (resampled to 16 kHz).
        versions: ``check`` (refuse a checkpoint whose remote code pins other library
            versions) or ``ignore``.
        memory: minutes of Realtime-Venus-Omni's long-video memory (``model.use_memory``);
            0 leaves it off.
    """

    device: str = "auto"
    dtype: str = "auto"
    attn: str = "sdpa"
    variant: str = "omni"
    speak_tokens: int = 20
    decode: str = "sampling"
    ref_audio: str = ""
    versions: str = "check"
    memory: int = 0

    def __post_init__(self) -> None:
        choices = {
            "dtype": ("auto", "bf16", "fp16", "fp32"),
            "attn": ("sdpa", "flash_attention_2", "eager"),
            "variant": ("omni", "audio"),
            "decode": ("sampling", "greedy"),
            "versions": ("check", "ignore"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}")
        device = self.device
        if not (device in ("auto", "cpu", "cuda") or device.startswith("cuda:")):
            raise ValueError("device must be auto, cpu, cuda or cuda:N")
        if not 1 <= self.speak_tokens <= 200:
            raise ValueError("speak_tokens must be in 1..200")
        if not 0 <= self.memory <= 24 * 60:
            raise ValueError("memory must be in 0..1440 minutes")


def parse_venus_spec(argument: str) -> tuple[Path, VenusOptions]:
    """Split ``PATH[,KEY=VALUE...]`` (the text after ``venus:``).

    Raises:
        FrontendError: no path, an unknown option or a bad value.
    """
    path, *raw_options = (part.strip() for part in argument.split(","))
    if not path:
        raise FrontendError("frontend 'venus' needs a checkpoint folder: venus:PATH[,OPTION...]")
    known = {f.name: f.type for f in fields(VenusOptions)}
    values: dict[str, Any] = {}
    for raw in filter(None, raw_options):
        key, sep, value = raw.partition("=")
        if not sep or key not in known or not value:
            raise FrontendError(
                f"frontend 'venus': unknown option {raw!r}; options: "
                + ", ".join(f"{k}=..." for k in known)
            )
        numeric = key in ("speak_tokens", "memory") and value.isdigit()
        values[key] = int(value) if numeric else value
    try:
        return Path(path).expanduser(), VenusOptions(**values)
    except (TypeError, ValueError) as exc:
        raise FrontendError(f"frontend 'venus': {exc}") from exc


def _resolve_device(info: CheckpointInfo, options: VenusOptions, cuda: bool) -> str:
    if options.device.startswith("cuda") and not cuda:
        raise FrontendError(
            f"venus: device={options.device} but torch sees no CUDA device"
            " (is this torch a CPU build? `python -c 'import torch; print(torch.version.cuda)'`)"
        )
    if options.device != "auto":
        return options.device
    if cuda:
        return "cuda"
    if info.parameters > CPU_PARAMETER_LIMIT:
        fp32 = info.parameters * 4
        raise FrontendError(
            f"venus: no CUDA device, and {info.parameters / 1e9:.1f} B parameters on CPU would "
            f"take at least ~{expected_unit_seconds(fp32, 'cpu'):.0f} s per 1 s unit (fp32 "
            f"weights read {PASSES_PER_UNIT} times per unit at ~20 GB/s); real time needs < 1 s. "
            "On an RTX PRO 6000 a unit takes ~0.4 s, on an A100 0.9-1.0 s. Use a GPU machine, "
            "the remote frontend, "
            "or pass device=cpu to run this slowly anyway."
        )
    _LOG.warning("venus: no CUDA device; running %s on CPU in fp32", info.path)
    return "cpu"


def _dtype(torch: Any, options: VenusOptions, device: str) -> Any:
    name = options.dtype
    if name == "auto":
        name = "fp32" if device == "cpu" else "bf16"
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def load_venus_frontend(path: str | Path, options: VenusOptions | None = None) -> VenusFrontend:
    """Load a checkpoint folder and wrap its duplex API.

    Args:
        path: a local Realtime-Venus-Omni/-Audio or MiniCPM-o 4.5 folder (nothing is downloaded).
        options: see :class:`VenusOptions`.

    Raises:
        FrontendError: a missing or malformed checkpoint, transformers/torch missing or at
            versions the checkpoint's remote code does not support, no CUDA for a checkpoint
            too large for CPU (with the expected per-unit time), or a load failure.
    """
    options = options or VenusOptions()
    info = inspect_checkpoint(path)
    if options.versions == "check":
        check_versions(info)
    for token, (have, want) in known_token_mismatches(info).items():
        _LOG.warning("venus: %s has id %d here, %d in MiniCPM-o 4.5", token, have, want)
    if info.token_ids and not info.can_delegate:
        _LOG.warning("venus: %s has no <delegate>/<backend> tokens: it cannot delegate", info.path)
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise FrontendError(
            f"venus: {exc.name} is not installed; install the GPU environment "
            "(scripts/venus_gpu_env.sh) or, for the CPU stand-in, `pip install -e '.[test]'`"
        ) from exc
    device = _resolve_device(info, options, torch.cuda.is_available())
    dtype = _dtype(torch, options, device)
    kwargs: dict[str, Any] = {
        "trust_remote_code": True,
        "local_files_only": True,
        "attn_implementation": options.attn,
    }
    # transformers renamed torch_dtype to dtype in 4.56; the upstream pin (4.51) knows only
    # the old name.
    new_name = tuple(int(p) for p in transformers.__version__.split(".")[:2]) >= (4, 56)
    kwargs["dtype" if new_name else "torch_dtype"] = dtype
    if options.variant == "audio":
        kwargs.update(init_vision=False, init_audio=True, init_tts=True)
    t0 = time.perf_counter()
    try:
        model = transformers.AutoModel.from_pretrained(str(info.path), **kwargs)
        model = model.eval().to(device)
        if options.memory:
            if not callable(getattr(model, "use_memory", None)):
                raise FrontendError(f"venus: {info.path} has no long-video memory (use_memory)")
            model.use_memory(memory_minutes=options.memory)
        duplex = model.as_duplex(generate_audio=True) if options.variant == "audio" else None
        duplex = duplex if duplex is not None else model.as_duplex()
        tokenizer = getattr(duplex, "tokenizer", None) or getattr(model, "tokenizer", None)
        if tokenizer is None:
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                str(info.path), trust_remote_code=True, local_files_only=True
            )
    except FrontendError:
        raise
    except (OSError, ValueError, ImportError, RuntimeError, AttributeError) as exc:
        raise FrontendError(
            f"venus: loading {info.path} failed: {type(exc).__name__}: {exc}"
        ) from exc
    _LOG.info(
        "venus: loaded %s (%s, %.2f B parameters) on %s as %s in %.1f s",
        info.path,
        info.model_type,
        info.parameters / 1e9,
        device,
        str(dtype).removeprefix("torch."),
        time.perf_counter() - t0,
    )
    ref_audio = _read_ref_audio(options.ref_audio) if options.ref_audio else None
    return VenusFrontend(
        duplex,
        tokenizer=tokenizer,
        speak_tokens=options.speak_tokens,
        decode_mode=options.decode,
        send_frames=options.variant == "omni",
        ref_audio=ref_audio,
        prompt_wav_path=options.ref_audio or None,
    )


def _read_ref_audio(path: str) -> np.ndarray:
    import soundfile

    from venus_ros.core.units import resample

    try:
        audio, rate = soundfile.read(path, dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as exc:
        raise FrontendError(f"venus: cannot read ref_audio {path}: {exc}") from exc
    return resample(audio.mean(axis=1), rate, 16000)


def make_venus_frontend(argument: str) -> VenusFrontend:
    """Build the frontend from the text after ``venus:`` (see :func:`parse_venus_spec`)."""
    path, options = parse_venus_spec(argument)
    return load_venus_frontend(path, options)
