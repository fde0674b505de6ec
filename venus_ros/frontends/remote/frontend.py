"""The remote frontend: the duplex model runs on another machine, the floor stays on the robot.

Per unit, :meth:`RemoteFrontend.prefill` hands the unit to the :class:`~.link.Link` (never
blocking) and :meth:`RemoteFrontend.generate` waits for that unit's answer until the deadline
(``deadline_ms`` after sending). What comes back is mapped onto :class:`UnitOutput`; the robot's
duplex loop then parses private spans, fixes delegate cutoffs and injects ``<backend>`` replies
(they arrive here as ``unit.texts`` and are forwarded to the model) exactly as with a local model.

A unit whose answer is late is answered locally and counted as *dropped*: ``listen`` while
listening; while speaking, "speak, nothing new", so the speech already queued keeps playing and
the turn goes on. When the late answer arrives it is folded into the next unit's output, so no
text (and no private span) the model wrote is lost. When the session breaks mid-turn the turn is
ended on the robot (a yield: the speaker flushes; an unclosed private span is reported by the
loop's parser, never spoken). While the link is down the frontend keeps answering ``listen``;
if a fallback frontend is configured it takes over after ``fallback_after_s`` (and hands back
at a listening boundary once the server is reachable again).
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from venus_ros.core.clock import Clock
from venus_ros.core.frontend import Decision, Frontend, FrontendError, UnitOutput
from venus_ros.core.units import InputUnit, resample
from venus_ros.frontends.remote.codec import wav_base64
from venus_ros.frontends.remote.link import MAX_SAMPLES, Answer, Link
from venus_ros.frontends.remote.options import RemoteOptions, parse_options

log = logging.getLogger("venus_ros.frontends.remote")


@dataclass
class RemoteStats:
    """Per-frontend counters (the link's own are in :attr:`RemoteFrontend.link`).

    Attributes:
        units: units generated.
        answered: units answered by the server in time.
        dropped: units answered locally because the answer was late or the link down.
        late: answers that arrived after their deadline (folded into a later unit).
        fallback_units: units answered by the fallback frontend.
        dropped_texts: injected texts the server could not take.
        turns_cut: turns ended on the robot because the session broke mid-turn.
    """

    units: int = 0
    answered: int = 0
    dropped: int = 0
    late: int = 0
    fallback_units: int = 0
    dropped_texts: int = 0
    turns_cut: int = 0
    wait_s: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_SAMPLES))


def make_link(options: RemoteOptions, system_prompt: str = "", ref_audio: str = "") -> Link:
    """The link for ``options.protocol`` (``ref_audio``: base64 of a WAV voice clip)."""
    if options.protocol == "vllm":
        from venus_ros.frontends.remote.vllm_omni import VllmOmniLink

        return VllmOmniLink(options, system_prompt, ref_audio)
    try:
        from venus_ros.frontends.remote.minicpmo import MiniCPMoLink
    except ImportError as exc:  # pragma: no cover - the SDK is an install requirement
        raise FrontendError("remote frontend: pip install openbmb-realtime") from exc
    return MiniCPMoLink(options, system_prompt, ref_audio)


class RemoteFrontend(Frontend):
    """A frontend whose model runs behind a realtime protocol on another machine.

    Args:
        options: parsed options (see :class:`RemoteOptions`).
        clock: passed to the fallback frontend.
    """

    def __init__(self, options: RemoteOptions, clock: Clock | None = None) -> None:
        self.options = options
        self.clock = clock
        self.output_sample_rate = options.rate
        self.stats = RemoteStats()
        self.link: Link | None = None
        self._system_prompt = ""
        self._speaking = False
        self._unit: InputUnit | None = None
        self._sent = False
        self._sent_at = 0.0
        self._carry: list[Answer] = []
        self._fallback: Frontend | None = None
        self._fallback_active = False
        self._fallback_thread: threading.Thread | None = None
        self._fallback_failed = False
        self._warned_texts = False

    # ------------------------------------------------------------------ contract
    def prepare(self, system_prompt: str = "", ref_audio: np.ndarray | None = None) -> None:
        """Open a session with the server (waits up to ``connect_timeout_s``).

        Args:
            system_prompt: sent to the model when the session opens.
            ref_audio: the assistant's voice, mono 16 kHz (else the ``ref_audio`` option's file).

        Raises:
            FrontendError: the ``ref_audio`` file cannot be read.
        """
        self.close()
        self._system_prompt = system_prompt
        voice = ""
        if ref_audio is not None and np.asarray(ref_audio).size:
            voice = wav_base64(ref_audio)
        elif self.options.ref_audio:
            try:
                voice = base64.b64encode(Path(self.options.ref_audio).read_bytes()).decode()
            except OSError as exc:
                raise FrontendError(f"remote frontend: cannot read ref_audio: {exc}") from exc
        self._speaking = False
        self._carry = []
        self._fallback_active = False
        self.link = make_link(self.options, system_prompt, voice)
        self.link.start()
        if not self.link.wait_connected(self.options.connect_timeout_s) and self.options.fallback:
            self._build_fallback(wait=True)

    def prefill(self, unit: InputUnit) -> None:
        """Send the unit to the server (or to the fallback while it has the floor)."""
        if self.link is None:
            self.prepare()
        assert self.link is not None
        self._unit = unit
        self._maybe_switch()
        if self._fallback_active and self._fallback is not None:
            self._fallback.prefill(unit)
            return
        if unit.texts and not self.link.can_inject and self.link.connected:
            self.stats.dropped_texts += len(unit.texts)
            if not self._warned_texts:
                self._warned_texts = True
                log.warning(
                    "remote frontend: %s cannot take injected text; backend replies are dropped",
                    self.options.url,
                )
        self._sent_at = time.monotonic()
        self._sent = self.link.submit(unit)

    def generate(self) -> UnitOutput:
        """The server's answer for the unit, or a local one if it did not come in time."""
        unit = self._unit
        if unit is None or self.link is None:
            raise FrontendError("remote frontend: generate() called before prefill()")
        self.stats.units += 1
        if self._fallback_active and self._fallback is not None:
            self.stats.fallback_units += 1
            return self._track(self._from_fallback(self._fallback.generate()))
        fresh = self.link.take(unit.index, self._sent_at + self.options.deadline_s)
        self.stats.wait_s.append(time.monotonic() - self._sent_at)
        self.stats.late += sum(1 for a in fresh if a.index < unit.index)
        answers, self._carry = self._carry + fresh, []
        if not answers:
            self.stats.dropped += 1
            if self._speaking and not self.link.connected:
                self.stats.turns_cut += 1
                return self._track(UnitOutput(Decision.LISTEN, end_of_turn=True))
            return UnitOutput(Decision.SPEAK if self._speaking else Decision.LISTEN)
        if any(a.index == unit.index for a in fresh):
            self.stats.answered += 1
        else:
            self.stats.dropped += 1
        return self._track(self._merge(answers))

    def close(self) -> None:
        """Close the session and any fallback (a later :meth:`prepare` starts afresh)."""
        if self.link is not None:
            self.link.close()
            self.link = None
        if self._fallback_thread is not None:
            self._fallback_thread.join(30)  # a fallback still being built
            self._fallback_thread = None
        if self._fallback is not None:
            self._fallback.close()
            self._fallback = None
        self._fallback_failed = False
        self._fallback_active = False

    # ------------------------------------------------------------------ mapping
    def _merge(self, answers: list[Answer]) -> UnitOutput:
        """One output for the answers that arrived, oldest first.

        A turn that ended and a new turn that started are never merged into one unit: the new
        turn's answers wait for the next unit.
        """
        speaking = self._speaking
        spoke = False
        ended = False
        texts: list[str] = []
        audio: list[np.ndarray] = []
        for i, answer in enumerate(answers):
            if answer.decision is Decision.LISTEN:
                if speaking:
                    ended, speaking = True, False
                continue
            if ended:
                self._carry = answers[i:]
                break
            spoke, speaking = True, True
            texts.append(answer.text)
            if answer.audio.size:
                audio.append(self._resampled(answer.audio, answer.rate))
            if answer.end_of_turn:
                ended, speaking = True, False
        if not spoke:
            return UnitOutput(Decision.LISTEN, end_of_turn=ended)
        samples = np.concatenate(audio) if audio else np.zeros(0, np.float32)
        return UnitOutput(Decision.SPEAK, text="".join(texts), audio=samples, end_of_turn=ended)

    def _resampled(self, audio: np.ndarray, rate: int) -> np.ndarray:
        if rate == self.output_sample_rate:
            return audio.astype(np.float32, copy=False)
        return resample(audio, rate, self.output_sample_rate)

    def _from_fallback(self, out: UnitOutput) -> UnitOutput:
        rate = self._fallback.output_sample_rate if self._fallback else self.output_sample_rate
        if out.audio.size and rate != self.output_sample_rate:
            return UnitOutput(
                out.decision,
                out.text,
                resample(out.audio, rate, self.output_sample_rate),
                out.end_of_turn,
            )
        return out

    def _track(self, out: UnitOutput) -> UnitOutput:
        """Follow the floor the loop will see (the same rules as the duplex loop)."""
        if out.decision is Decision.SPEAK:
            self._speaking = not out.end_of_turn
        elif out.end_of_turn or not self._speaking:
            self._speaking = False
        return out

    # ------------------------------------------------------------------ fallback
    def _maybe_switch(self) -> None:
        link = self.link
        if link is None or not self.options.fallback or self._speaking:
            return
        if self._fallback_active:
            if link.connected:
                log.info(
                    "remote frontend: %s is back; the remote model has the floor again",
                    self.options.url,
                )
                self._fallback_active = False
            return
        if link.down_for >= self.options.fallback_after_s:
            if self._fallback is None:
                self._build_fallback(wait=False)
            elif not link.connected:
                log.warning(
                    "remote frontend: '%s' takes over while %s is unreachable",
                    self.options.fallback,
                    self.options.url,
                )
                self._fallback_active = True

    def _build_fallback(self, wait: bool) -> None:
        """Build (off the foreground thread) and prepare the fallback frontend."""
        if self._fallback_thread is not None or self._fallback_failed:
            return

        def build() -> None:
            from venus_ros.frontends import make_frontend

            try:
                fallback = make_frontend(self.options.fallback, clock=self.clock)
                fallback.prepare(system_prompt=self._system_prompt)
            except Exception as exc:
                self._fallback_failed = True
                log.error("remote frontend: fallback '%s' failed: %s", self.options.fallback, exc)
                return
            self._fallback = fallback

        self._fallback_thread = threading.Thread(target=build, name="venus-remote-fallback")
        self._fallback_thread.start()
        if wait:
            self._fallback_thread.join()
            if self._fallback is not None and self.link is not None and not self.link.connected:
                log.warning(
                    "remote frontend: '%s' takes over while %s is unreachable",
                    self.options.fallback,
                    self.options.url,
                )
                self._fallback_active = True


def make_remote_frontend(argument: str, clock: Clock | None = None) -> RemoteFrontend:
    """Build a :class:`RemoteFrontend` from ``URL[,key=value,...]``.

    Raises:
        FrontendError: for a missing URL or a bad option.
    """
    return RemoteFrontend(parse_options(argument), clock=clock)
