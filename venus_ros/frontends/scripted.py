"""A scripted frontend: says what a small YAML script tells it, when the script says so.

It speaks the frontend contract exactly, so tests, the bundled sample session and the
evaluation runner exercise the real duplex loop with a deterministic model. Its "voice" is a
synthetic voiced tone, one burst per visible word, so that audio length follows the words spoken.

Script keys (all optional except ``replies``)::

    output_sample_rate: 24000   # Hz of the produced audio
    speech_rms: 0.01            # RMS over 20 ms frames above which the user is speaking
    words_per_unit: 3           # text tokens emitted per unit
    word_ms: 300                # audio per visible word
    compute_ms: 0               # simulated compute per unit (advances a fake clock)
    slow_units: {4: 1500}       # per-unit compute override, ms
    barge_in_ms: 0              # >0: yield when the user talks over the assistant this long
    replies:                    # consumed in order; each starts one assistant turn
      - after_speech: true      # when the user has spoken and then fallen quiet
        text: "Hi! <delegate>check the weather</delegate> One moment."
      - at_unit: 9              # at this unit index or later
        text: "..."
      - on_backend: true        # when a <backend> reply arrives; {backend} is its text
        text: "{backend}"

:meth:`ScriptedFrontend.schedule_turns` (evaluation ``assistant_turns``) adds turns by session
time: at the first unit boundary at or after its start, a scheduled text starts a turn, or is
appended to the turn being spoken; ``barge_in_ms`` then decides whether it yields to the user.
Scheduled turns come before the script's replies when both are due.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from venus_ros.core.clock import Clock
from venus_ros.core.frontend import Decision, Frontend, FrontendError, UnitOutput
from venus_ros.core.protocol import SpanParser, VisibleText
from venus_ros.core.units import InputUnit

_BACKEND = re.compile(r"<backend>(.*?)</backend>", re.DOTALL)
_TOKEN = re.compile(r"\S+\s*")
_FRAME_S = 0.02
_QUIET_TAIL_S = 0.4


class Reply(BaseModel):
    """One scripted assistant turn and its trigger."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1)
    after_speech: bool = False
    at_unit: int | None = Field(default=None, ge=0)
    on_backend: bool = False

    @model_validator(mode="after")
    def _one_trigger(self) -> Reply:
        triggers = [self.after_speech, self.at_unit is not None, self.on_backend]
        if sum(triggers) != 1:
            raise ValueError("each reply needs exactly one of after_speech, at_unit, on_backend")
        return self


class Script(BaseModel):
    """A whole script, validated; unknown keys are errors (typos must not pass silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    output_sample_rate: int = Field(default=24000, ge=8000, le=48000)
    speech_rms: float = Field(default=0.01, gt=0)
    words_per_unit: int = Field(default=3, ge=1, le=20)
    word_ms: int = Field(default=300, ge=20)
    compute_ms: float = Field(default=0.0, ge=0)
    slow_units: dict[int, float] = Field(default_factory=dict)
    barge_in_ms: float = Field(default=0.0, ge=0)
    replies: list[Reply] = Field(min_length=1)

    @model_validator(mode="after")
    def _fits_a_unit(self) -> Script:
        if self.words_per_unit * self.word_ms > 1000:
            raise ValueError("words_per_unit * word_ms must be <= 1000 (audio must fit a unit)")
        return self


def load_script(path: str | Path) -> Script:
    """Read and validate a script file.

    Raises:
        FrontendError: naming the file and every invalid key.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Script.model_validate(data)
    except FileNotFoundError as exc:
        raise FrontendError(f"scripted frontend: no script file {path}") from exc
    except yaml.YAMLError as exc:
        raise FrontendError(f"scripted frontend: {path} is not valid YAML: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise FrontendError(f"scripted frontend: {path}: {problems}") from exc


class ScriptedFrontend(Frontend):
    """Plays a :class:`Script` through the frontend contract.

    Args:
        script: the validated script.
        clock: if given, simulated compute time is spent on it with ``clock.sleep``.
    """

    def __init__(self, script: Script, clock: Clock | None = None) -> None:
        self.script = script
        self.clock = clock
        self.output_sample_rate = script.output_sample_rate
        self._schedule: tuple[tuple[float, str], ...] = ()
        self.prepare()

    def schedule_turns(self, turns: Sequence[tuple[float, str]]) -> None:
        """Speak each ``(start, text)`` from the first unit boundary at or after ``start``.

        Replaces any earlier schedule; kept across :meth:`prepare` (which restarts it).

        Raises:
            ValueError: for a negative or non-finite start, or an empty text.
        """
        schedule = []
        for start, text in turns:
            start = float(start)
            if not math.isfinite(start) or start < 0:
                raise ValueError(f"scheduled turn start must be a finite time >= 0, got {start}")
            if not str(text).strip():
                raise ValueError(f"scheduled turn at {start:g} s has no text")
            schedule.append((start, str(text)))
        self._schedule = tuple(sorted(schedule, key=lambda turn: turn[0]))
        self._scheduled = deque(self._schedule)

    def prepare(self, system_prompt: str = "", ref_audio: np.ndarray | None = None) -> None:
        """Start over from the first reply (and the first scheduled turn)."""
        self._replies = deque(self.script.replies)
        self._scheduled: deque[tuple[float, str]] = deque(self._schedule)
        self._backend: deque[str] = deque()
        self._tokens: deque[tuple[str, int]] = deque()
        self._unit: InputUnit | None = None
        self._user_spoke = False

    def prefill(self, unit: InputUnit) -> None:
        """Take in one unit: note user speech and any backend replies."""
        self._unit = unit
        for text in unit.texts:
            self._backend.extend(m.strip() for m in _BACKEND.findall(text))

    def generate(self) -> UnitOutput:
        """Continue the current turn, start the next due reply, or listen."""
        unit = self._unit
        if unit is None:
            raise FrontendError("scripted frontend: generate() called before prefill()")
        self._spend(unit.index)
        active = self._active_frames(unit)
        speaking_now = active.size > 0 and bool(active[-int(_QUIET_TAIL_S / _FRAME_S) :].any())
        if self._tokens:
            barge = self.script.barge_in_ms
            if barge and active.sum() * _FRAME_S * 1000 >= barge:
                self._tokens.clear()
                self._user_spoke = True  # the interruption is user speech to answer
                return UnitOutput(Decision.LISTEN, end_of_turn=True)
            self._take_scheduled(unit.end_s, continuing=True)
            return self._speak()
        self._user_spoke |= bool(active.any())
        if self._take_scheduled(unit.end_s, continuing=False):
            return self._speak()
        if self._replies and self._due(self._replies[0], unit.index, speaking_now):
            self._start(self._replies.popleft())
            return self._speak()
        return UnitOutput(Decision.LISTEN)

    def _due(self, reply: Reply, index: int, user_speaking: bool) -> bool:
        if reply.at_unit is not None:
            return index >= reply.at_unit
        if reply.on_backend:
            return bool(self._backend)
        return self._user_spoke and not user_speaking

    def _take_scheduled(self, now: float, continuing: bool) -> bool:
        """Voice every scheduled turn due by ``now``; True if any was taken."""
        taken = False
        while self._scheduled and self._scheduled[0][0] <= now + 1e-9:
            _, text = self._scheduled.popleft()
            if self._tokens and not self._tokens[-1][0][-1:].isspace():
                token, words = self._tokens.pop()  # a word break between the two texts
                self._tokens.append((token + " ", words))
            self._voice_text(text)
            taken = True
        if taken and not continuing:
            self._user_spoke = False
        return taken

    def _start(self, reply: Reply) -> None:
        text = reply.text
        if reply.on_backend:
            text = text.replace("{backend}", self._backend.popleft())
        self._user_spoke = False
        self._voice_text(text)

    def _voice_text(self, text: str) -> None:
        """Queue ``text`` as tokens, each with the number of visible words it voices."""
        parser = SpanParser(max_query_chars=1 << 20)
        tokens = _TOKEN.findall(text)
        for i, token in enumerate(tokens):
            events = parser.feed(token) + (parser.end_turn() if i == len(tokens) - 1 else [])
            words = sum(len(e.text.split()) for e in events if isinstance(e, VisibleText))
            self._tokens.append((token, words))

    def _speak(self) -> UnitOutput:
        count = min(self.script.words_per_unit, len(self._tokens))
        taken = [self._tokens.popleft() for _ in range(count)]
        text = "".join(token for token, _ in taken)
        audio = np.concatenate(
            [np.zeros(0, np.float32)] + [self._voice(token) for token, words in taken if words]
        )
        return UnitOutput(Decision.SPEAK, text=text, audio=audio, end_of_turn=not self._tokens)

    def _voice(self, word: str) -> np.ndarray:
        rate = self.output_sample_rate
        n = int(rate * self.script.word_ms / 1000)
        f0 = 110.0 + 15.0 * (zlib.crc32(word.encode()) % 8)
        t = np.arange(n) / rate
        wave = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in (1, 2, 3))
        return (0.2 * np.hanning(n) * wave).astype(np.float32)

    def _active_frames(self, unit: InputUnit) -> np.ndarray:
        hop = int(16000 * _FRAME_S)
        frames = unit.audio[: unit.audio.shape[0] // hop * hop].reshape(-1, hop)
        rms = np.sqrt(np.mean(np.square(frames, dtype=np.float64), axis=1))
        return rms > self.script.speech_rms

    def _spend(self, index: int) -> None:
        ms = self.script.slow_units.get(index, self.script.compute_ms)
        if self.clock is not None and ms > 0:
            self.clock.sleep(ms / 1000.0)
