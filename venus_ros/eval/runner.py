"""The evaluation runner: each scenario played through the real duplex loop, faster than real time.

:func:`run_sample` plays one sample's ``input.wav`` through
:func:`venus_ros.core.session.run_offline` (the path of ``venus-ros replay``: the live node's
unit assembler and duplex loop on a fake clock, a :class:`~venus_ros.core.playback.PlaybackQueue`
standing in for the speaker) and collects what the metrics need: the timeline, the assistant's
audio as the speaker PLAYED it (flushes applied) on the session time axis, the delegated
queries, the tool calls and the per-unit compute.

Delegations go to a real :class:`~venus_ros.harness.runner.HarnessRunner` whose registry holds
one *recording* tool per entry of the suite's ``tools.json`` (restricted to the sample's
``tools`` when given): each call is recorded with its validated arguments and answered with the
spec's canned result, and the polished reply is inserted into the loop as a ``<backend>`` span,
as live. The router picks the tool: by default the harness's own local planner
(:mod:`venus_ros.harness.planner`) over the recording tools, as a harness with no cloud LLM
routes; only registered tools count.

With ``echo``, the microphone hears the speaker: the played audio, delayed and attenuated, is
added to the user's signal as it is fed in. This closes a loop (what is played depends on what
was heard), so the microphone frames are produced lazily and each adds only audio the speaker
had already committed to playing.

One failing sample never stops a suite: its :class:`SampleRun` carries the error.
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from venus_ros.core.clock import FakeClock
from venus_ros.core.duplex import DelegateRequest
from venus_ros.core.frontend import DEFAULT_OUTPUT_RATE
from venus_ros.core.playback import PlaybackQueue, render_played
from venus_ros.core.session import SessionConfig, SessionResult, run_offline
from venus_ros.core.timeline import TimelineView
from venus_ros.core.units import resample
from venus_ros.eval.judge import Judge, Transcriber, WhisperTranscriber, make_judge
from venus_ros.eval.metrics import MetricsConfig, SampleRun
from venus_ros.eval.scenario import OVERLAP_CATEGORIES, Sample, Suite, ToolCall, ToolSpec
from venus_ros.harness.planner import planner_router, with_planner_tool
from venus_ros.harness.tools import Tool, ToolRegistry, ToolResult

#: ``router(query) -> (tool_name, args) | None``, as the harness runner takes it.
Router = Callable[[str], "tuple[str, dict[str, Any]] | None"]

#: Default echo path: the speaker is heard this much later ...
ECHO_DELAY_S = 0.06
#: ... and this much quieter (dB).
ECHO_GAIN_DB = -12.0
#: How long a delegated task may take (wall time) before its reply is given up on.
DELEGATE_WAIT_S = 10.0
#: Session time between a delegate and its reply becoming available to the loop.
DELEGATE_DELAY_S = 0.0
_ECHO_MARGIN_S = 0.01


def run_sample(
    sample: Sample,
    frontend: str,
    *,
    tools: Sequence[ToolSpec] = (),
    echo: bool = False,
    router: Router | None = None,
    config: SessionConfig | None = None,
    echo_delay_s: float = ECHO_DELAY_S,
    echo_gain_db: float = ECHO_GAIN_DB,
    delegate_delay_s: float = DELEGATE_DELAY_S,
    delegate_wait_s: float = DELEGATE_WAIT_S,
    clean: bool = False,
) -> SampleRun:
    """Play one sample through the duplex loop (and the harness) and collect its run.

    Args:
        sample: the scenario.
        frontend: a frontend spec for :func:`venus_ros.frontends.make_frontend`; a fresh
            frontend is built for the sample.
        tools: the suite's tool set; each becomes a recording tool.
        echo: mix the played assistant audio back into the microphone signal.
        router: picks ``(tool, args)`` for a delegated query (default: the local planner over
            the recording tools); only registered tools count.
        config: session settings (default: :class:`SessionConfig` with a timeline window that
            holds the whole sample).
        echo_delay_s: echo delay; at least one microphone frame plus 10 ms.
        echo_gain_db: echo attenuation (negative: quieter).
        delegate_delay_s: session time from a delegate until its reply may be inserted.
        delegate_wait_s: wall time a delegated task may take before its reply is given up on.
        clean: play the sample's clean input instead (FDB v1.5's ``clean_input.wav``: the
            input without the overlap event; :meth:`Sample.clean_audio`).

    Returns:
        The run; on failure, a run with ``error`` set (never raises for a bad sample).
    """
    try:
        return _run(
            sample,
            frontend,
            tools,
            echo,
            router,
            config,
            echo_delay_s,
            echo_gain_db,
            delegate_delay_s,
            delegate_wait_s,
            clean,
        )
    except Exception as exc:  # one sample must never stop the suite
        return _failed(sample, f"{type(exc).__name__}: {exc}")


def run_suite(
    suite: Suite,
    frontend: str,
    *,
    echo: bool = False,
    progress: bool = False,
    router: Router | None = None,
    **options: Any,
) -> list[SampleRun]:
    """Run every sample of ``suite`` with a fresh ``frontend`` each.

    Args:
        suite: the loaded suite.
        frontend: a frontend spec.
        echo: mix the assistant's played audio back into the microphone.
        progress: show a progress bar on stderr.
        router: picks tools for delegated queries (see :func:`run_sample`).
        **options: further keyword arguments of :func:`run_sample`.

    Returns:
        One run per sample, in the suite's order.

    Raises:
        FrontendError: the frontend spec cannot be built at all (unknown name, bad script).
    """
    check_frontend(frontend)
    samples: Sequence[Sample] = suite.samples
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(samples), file=sys.stderr, unit="sample", desc=frontend)
    runs = []
    try:
        for sample in samples:
            runs.append(
                run_sample(sample, frontend, tools=suite.tools, echo=echo, router=router, **options)
            )
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return runs


def content_judge(spec: str = "offline", asr_model: str = "tiny.en") -> tuple[Judge, Transcriber]:
    """The judge and transcriber the CLI scores with: for ``offline``, the packaged
    all-MiniLM-L6-v2 sentence embedder (ONNX Runtime, from the cascade's embedding module: the
    runner is the one evaluation module that may reach into the frontends) is injected into
    :class:`~venus_ros.eval.judge.OfflineJudge`; ``openai:MODEL`` needs no embedder. Both read
    faster-whisper word-timed transcripts of the played audio.

    Raises:
        ValueError: an unknown judge spec.
    """
    embed = None
    if spec == "offline":
        from venus_ros.frontends.cascade.embed import Embedder

        embed = Embedder().embed
    return make_judge(spec, embed=embed), WhisperTranscriber(asr_model)


def check_frontend(spec: str) -> None:
    """Build (and close) the frontend once, so that a bad spec fails before any sample runs.

    Raises:
        FrontendError: naming the problem.
    """
    from venus_ros.frontends import make_frontend

    make_frontend(spec, clock=FakeClock()).close()


#: Silence fed after a sample's recording: the metrics' response window (5 s) fits after it.
TAIL_S = 5.0


# --- one sample -------------------------------------------------------------------------------


def _run(
    sample: Sample,
    spec: str,
    tools: Sequence[ToolSpec],
    echo: bool,
    router: Router | None,
    config: SessionConfig | None,
    echo_delay_s: float,
    echo_gain_db: float,
    delegate_delay_s: float,
    delegate_wait_s: float,
    clean: bool = False,
) -> SampleRun:
    from venus_ros.frontends import make_frontend

    loaded = sample.clean_audio() if clean else None
    audio, rate = loaded if loaded is not None else sample.load_audio()
    # The session runs on past the recording, so a response after its last word is scored.
    audio = np.concatenate([audio, np.zeros(round(TAIL_S * rate), np.float32)])
    duration = len(audio) / rate
    config = config or SessionConfig(timeline_window_s=max(600.0, duration + 120.0))
    if echo and echo_delay_s < config.chunk_ms / 1000 + _ECHO_MARGIN_S:
        raise ValueError(
            f"echo delay {echo_delay_s:g} s must be at least one microphone frame "
            f"({config.chunk_ms} ms) plus {_ECHO_MARGIN_S * 1000:g} ms"
        )
    calls: list[ToolCall] = []
    registry = _registry(tools, sample.tools, calls)
    router = router or planner_router(registry)
    clock = FakeClock()
    frontend = make_frontend(spec, clock=clock)
    harness = _Harness(
        registry, _restricted(router, registry), clock, sample.id, delegate_delay_s, delegate_wait_s
    )
    try:
        if sample.assistant_turns:
            try:
                frontend.schedule_turns([(t.start, t.text) for t in sample.assistant_turns])
            except NotImplementedError as exc:
                return _failed(
                    sample,
                    f"frontend {spec!r} cannot be made to speak the scenario's assistant_turns "
                    f"({exc})",
                    frontend.output_sample_rate,
                )
        mic: np.ndarray | Iterator[np.ndarray] = audio
        hear: Callable[[SessionResult], None] | None = None
        if echo:
            mic, hear = echo_input(audio, rate, config.chunk_ms, echo_delay_s, echo_gain_db)

        def started(session: SessionResult) -> None:
            if hear is not None:
                hear(session)
            harness.attach(session)

        session = run_offline(
            mic, rate, frontend, clock=clock, config=config, on_delegate=harness, on_start=started
        )
    finally:
        harness.close()
        frontend.close()
    playback = session.playback
    compute = tuple(
        r.compute_s + wall for r, wall in zip(session.results, session.frontend_s, strict=True)
    )
    return SampleRun(
        sample=sample,
        records=tuple(session.timeline.snapshot()),
        played=render_played(playback.played_audio, playback.sample_rate),
        played_rate=playback.sample_rate,
        delegations=tuple(d.query for d in session.delegates),
        tool_calls=tuple(calls),
        unit_compute_s=compute,
        missed_units=_missed(session, compute, config),
        error=harness.error,
    )


def _failed(sample: Sample, error: str, rate: int = DEFAULT_OUTPUT_RATE) -> SampleRun:
    return SampleRun(
        sample=sample,
        records=(),
        played=np.zeros(0, np.float32),
        played_rate=rate,
        delegations=(),
        tool_calls=(),
        unit_compute_s=(),
        missed_units=0,
        error=error,
    )


def _missed(session: SessionResult, compute: Sequence[float], config: SessionConfig) -> int:
    """Units that missed their deadline by the loop's rule, charged with the compute measured
    here (session-clock compute plus the frontend's wall time), so that a real model run on a
    fake clock is held to real time too."""
    fraction = config.duplex.deadline_fraction
    debt, missed = 0.0, 0
    for result, spent in zip(session.results, compute, strict=True):
        unit_ms = config.units.first_unit_ms if result.index == 0 else config.units.unit_ms
        duration = unit_ms / 1000.0
        missed += int(spent + debt > duration * fraction)
        debt = max(0.0, debt + spent - duration)
    return missed


# --- echo -------------------------------------------------------------------------------------


class _Watch:
    """Holds the running session for the lazily produced microphone frames."""

    def __init__(self) -> None:
        self.playback: PlaybackQueue | None = None
        self._cursor = 0

    def start(self, session: SessionResult) -> None:
        self.playback = session.playback

    def speaker(self, start: float, end: float) -> tuple[np.ndarray, int]:
        """What the speaker plays in ``[start, end)`` as far as it is decided now, at its rate."""
        playback = self.playback
        if playback is None:
            raise RuntimeError("the echo path was read before the session started")
        rate = playback.sample_rate
        first = round(start * rate)
        out = np.zeros(max(0, round(end * rate) - first), np.float32)
        played = playback.played_audio
        while self._cursor < len(played) and _end(played[self._cursor], rate) <= first:
            self._cursor += 1  # pieces come in time order: those past never matter again
        for t, samples in [*played[self._cursor :], *playback.scheduled()]:
            at = round(t * rate) - first
            if at >= len(out):
                break
            lo, hi = max(at, 0), min(at + len(samples), len(out))
            if hi > lo:
                out[lo:hi] += samples[lo - at : hi - at]
        return out, rate


def _end(piece: tuple[float, np.ndarray], rate: int) -> int:
    return round(piece[0] * rate) + len(piece[1])


def echo_input(
    audio: np.ndarray,
    rate: int,
    chunk_ms: int,
    delay_s: float = ECHO_DELAY_S,
    gain_db: float = ECHO_GAIN_DB,
) -> tuple[Iterator[np.ndarray], Callable[[SessionResult], None]]:
    """The microphone of a robot that hears its own speaker: the frames of ``audio`` plus the
    played output ``delay_s`` earlier at ``gain_db`` (:func:`_echo_mic`), and the ``on_start``
    hook of :func:`~venus_ros.core.session.run_offline` that lets them read the playback."""
    watch = _Watch()
    gain = 10.0 ** (gain_db / 20.0)
    return _echo_mic(audio, rate, chunk_ms, watch, delay_s, gain), watch.start


def _echo_mic(
    audio: np.ndarray, rate: int, chunk_ms: int, watch: _Watch, delay_s: float, gain: float
) -> Iterator[np.ndarray]:
    """Microphone frames: the user's signal plus the speaker's output ``delay_s`` earlier.

    Each frame ``[t0, t1)`` adds the speaker's output over ``[t0 - delay, t1 - delay)``,
    rendered with a small margin and resampled to the microphone's rate. Since the delay
    exceeds a frame plus the margin, every sample it needs was decided at a unit boundary (or
    by a stop between boundaries, which flushes the playback as the frame that carried it is
    heard) already processed, so the echo is exactly what was (or is being) played.
    """
    step = max(1, round(rate * chunk_ms / 1000))
    for begin in range(0, len(audio), step):
        chunk = audio[begin : begin + step]
        t0 = begin / rate - delay_s
        t1 = t0 + len(chunk) / rate
        if t1 <= 0:
            yield chunk
            continue
        speaker, speaker_rate = watch.speaker(t0 - _ECHO_MARGIN_S, t1 + _ECHO_MARGIN_S)
        heard = resample(speaker, speaker_rate, rate)
        skip = round(_ECHO_MARGIN_S * rate)
        heard = heard[skip : skip + len(chunk)]
        if len(heard) < len(chunk):
            heard = np.pad(heard, (0, len(chunk) - len(heard)))
        yield np.clip(chunk + gain * heard, -1.0, 1.0).astype(np.float32)


# --- harness ----------------------------------------------------------------------------------


def _registry(
    specs: Sequence[ToolSpec], offered: Sequence[str] | None, calls: list[ToolCall]
) -> ToolRegistry:
    """Recording tools for the suite's specs, enabled as the sample offers (all when None).

    Raises:
        ValueError: the sample offers a tool that the suite's ``tools.json`` does not define.
    """
    defined = [spec.name for spec in specs]
    missing = [name for name in offered or () if name not in defined]
    if missing:
        raise ValueError(
            f"the sample offers tool(s) {', '.join(map(repr, missing))} that the suite's "
            f"tools.json does not define (it defines: {', '.join(defined) or 'none'})"
        )
    recording = [_recording_tool(spec, calls) for spec in specs]
    if offered is not None:
        recording = [tool for tool in recording if tool.name in offered]
    return ToolRegistry(with_planner_tool(recording))


def _recording_tool(spec: ToolSpec, calls: list[ToolCall]) -> Tool:
    """A tool that appends each call (arguments as validated) to ``calls`` and answers with
    the spec's canned result. It runs on the harness thread, one task at a time."""
    result = spec.result
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)

    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        calls.append(ToolCall(spec.name, dict(args)))
        return ToolResult(text, {"result": result})

    return Tool(name=spec.name, description=spec.description, schema=dict(spec.schema), run=run)


def _restricted(router: Router, registry: ToolRegistry) -> Router:
    def pick(query: str) -> tuple[str, dict[str, Any]] | None:
        picked = router(query)
        return picked if picked is not None and picked[0] in registry else None

    return pick


class _Harness:
    """The offline stand-in for the harness node: a real runner, started at the first delegate.

    Called as the session's ``on_delegate``: submits the query with its evidence, waits for the
    task to settle (bounded) and returns ``(delay, reply)`` for the loop.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        router: Router,
        clock: FakeClock,
        session_id: str,
        delay_s: float,
        wait_s: float,
    ) -> None:
        self._registry = registry
        self._router = router
        self._clock = clock
        self._session_id = session_id
        self._delay_s = delay_s
        self._wait_s = wait_s
        self._session: SessionResult | None = None
        self._runner: Any = None
        self.error = ""

    def attach(self, session: SessionResult) -> None:
        self._session = session

    def __call__(self, request: DelegateRequest) -> tuple[float, str] | None:
        from venus_ros.harness.polish import reply_text
        from venus_ros.harness.runner import HarnessRunner

        if self._runner is None:
            self._runner = HarnessRunner(
                self._registry,
                self._clock,
                max_concurrent=1,
                router=self._router,
                name=f"eval-{self._session_id}",
            )
        timeline = self._session.timeline if self._session is not None else None
        evidence = (
            timeline.snapshot(request.cutoff_seq)
            if timeline is not None
            else TimelineView((), request.cutoff_seq)
        )
        task = self._runner.submit(
            request.query, self._session_id, request.turn_id, request.cutoff_seq, evidence
        )
        try:
            settled = self._runner.future(task.id).result(timeout=self._wait_s)
        except concurrent.futures.TimeoutError:
            self._runner.cancel(task.id, "the evaluation stopped waiting")
            self.error = self.error or (
                f"delegated task {request.query!r} did not settle within {self._wait_s:g} s"
            )
            return None
        text = reply_text(settled)
        return (self._delay_s, text) if text else None

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()


# --- FDB export -------------------------------------------------------------------------------


def export_fdb(
    suite: Suite,
    runs: Sequence[SampleRun],
    frontend: str,
    out: Path,
    transcriber: Transcriber,
    *,
    echo: bool = False,
    config: MetricsConfig | None = None,
    progress: bool = False,
) -> list[Path]:
    """Write the runs in FDB's layout (:func:`venus_ros.eval.fdb.write_fdb_sample`) under
    ``out``, with a second run of each overlap sample on its clean input for
    ``clean_output.wav``, and word-timed transcripts of all four channels.

    Returns:
        The sample folders written (samples FDB has no task for are skipped).
    """
    from venus_ros.eval.fdb import write_fdb_sample
    from venus_ros.eval.metrics import user_segments, voice_segments

    config = config or MetricsConfig()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(runs), file=sys.stderr, unit="sample", desc=f"fdb-out {frontend}")
    written: list[Path] = []
    try:
        for run in runs:
            sample = run.sample
            if bar is not None:
                bar.update(1)
            if run.error or sample.category not in (*OVERLAP_CATEGORIES, "pause", "turn_taking"):
                continue
            transcripts: dict[str, Any] = {}
            segments = voice_segments(run.played, run.played_rate, config)
            transcripts["output"] = transcriber.words(run.played, run.played_rate, segments)
            audio, rate = sample.load_audio()
            transcripts["input"] = transcriber.words(
                audio, rate, user_segments(audio, rate, config)
            )
            clean_played = None
            if sample.category in OVERLAP_CATEGORIES:
                clean_run = run_sample(sample, frontend, tools=suite.tools, echo=echo, clean=True)
                if not clean_run.error:
                    clean_played = (clean_run.played, clean_run.played_rate)
                    transcripts["clean_output"] = transcriber.words(
                        clean_run.played,
                        clean_run.played_rate,
                        voice_segments(clean_run.played, clean_run.played_rate, config),
                    )
                clean_in = sample.clean_audio()
                if clean_in is not None:
                    transcripts["clean_input"] = transcriber.words(
                        *clean_in, user_segments(*clean_in, config)
                    )
            folder = write_fdb_sample(
                out, sample, (run.played, run.played_rate), clean_played, transcripts
            )
            if folder is not None:
                written.append(folder)
    finally:
        if bar is not None:
            bar.close()
    return written
