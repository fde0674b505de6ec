"""``venus-ros bench soak``: the real node set at real-time cadence for a long time.

Mic (a silent file, then silence), scripted frontend, harness, speaker and monitor run as one
process each in a private namespace. The script delegates periodically (arithmetic, the clock,
and short timers that speak when due) and speaks every backend reply, so each task goes the
whole way QUEUED → ... → DELIVERED through the Delegate action, the backend-reply topic,
playback and its acknowledgement. A probe in this process counts decisions and missed
deadlines, follows every task to a final state, and samples each node process's resident memory
and open file descriptors. Growth is the mean of the last fifth of the samples against the mean
of the samples just after warm-up (the first tenth of the run).
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: Units between two delegation cycles (each: arithmetic, the clock, a timer that speaks when due).
CYCLE_UNITS = 40
#: Final task states, by who reports them.
HARNESS_FINAL = {"DELIVERED", "FAILED", "CANCELLED"}
FRONTEND_FINAL = {"COMPLETED", "DELIVERED", "FAILED", "CANCELLED"}
#: Growth limit of memory and descriptors (fraction) and the seconds between samples.
GROWTH_LIMIT = 0.05
SAMPLE_EVERY_S = 10.0
#: No new delegation in the last this-many seconds, so that every task can end in the run.
QUIET_TAIL_S = 90.0


def soak_script(units: int) -> str:
    """The scripted frontend's YAML: a delegation cycle every :data:`CYCLE_UNITS` units."""
    lines = ["words_per_unit: 3", "word_ms: 300", "replies:"]
    for cycle, start in enumerate(range(5, units, CYCLE_UNITS)):
        a, b = 3 + cycle % 17, 4 + cycle % 11
        for offset, text in (
            (0, f"Okay. <delegate>what is {a} times {b}</delegate> Working on it."),
            (12, "Sure. <delegate>what time is it</delegate> Let me look."),
            (24, "Right. <delegate>set a timer for 8 seconds</delegate> Starting it now."),
        ):
            lines.append(f"  - at_unit: {start + offset}")
            lines.append(f"    text: {json.dumps(text)}")
            lines.append("  - on_backend: true")
            lines.append('    text: "{backend}"')
    return "\n".join(lines) + "\n"


@dataclass
class SoakCounts:
    """What the probe saw."""

    decisions: int = 0
    missed: int = 0
    first_unit: int | None = None
    last_unit: int = -1
    gaps: int = 0
    harness_tasks: dict[str, str] = field(default_factory=dict)
    frontend_tasks: dict[str, str] = field(default_factory=dict)
    delegations: int = 0
    protocol_errors: int = 0
    frontend_errors: int = 0
    heard_words: int = 0

    def not_final(self) -> tuple[dict[str, str], dict[str, str]]:
        """Tasks (harness, frontend) whose last state is not final."""
        return (
            {t: s for t, s in self.harness_tasks.items() if s not in HARNESS_FINAL},
            {t: s for t, s in self.frontend_tasks.items() if s not in FRONTEND_FINAL},
        )


def windows(samples: list[float]) -> tuple[float, float]:
    """The mean just after warm-up (second tenth of the samples) and over the last fifth."""
    n = len(samples)
    if n < 10:
        return (samples[-1], samples[-1]) if samples else (0.0, 0.0)
    early = float(np.mean(samples[n // 10 : n // 10 + max(1, n // 10)]))
    late = float(np.mean(samples[-max(1, n // 5) :]))
    return early, late


def growth(samples: list[float]) -> float:
    """Late mean over early mean, minus one (0 for fewer than 10 samples)."""
    early, late = windows(samples)
    return late / early - 1.0 if len(samples) >= 10 and early > 0 else 0.0


def bench_soak(minutes: float = 60.0, out: Path | None = None) -> int:
    """Run the soak for ``minutes``; print the figures; 0 if every goal was met, else 1."""
    import psutil

    from venus_interfaces.msg import TimelineEvent, UnitDecision
    from venus_ros.bench import probed_graph
    from venus_ros.launcher import NodeSpec
    from venus_ros.nodes.qos import TOPICS, reliable

    seconds = minutes * 60.0
    work = Path(out) if out else Path(tempfile.mkdtemp(prefix="venus_soak_"))
    work.mkdir(parents=True, exist_ok=True)
    silence = work / "silence.wav"
    import soundfile

    soundfile.write(str(silence), np.zeros(16000, np.float32), 16000, subtype="PCM_16")
    units = max(1, int(seconds - QUIET_TAIL_S))
    script = work / "script.yaml"
    script.write_text(soak_script(units), encoding="utf-8")
    nodes = [
        NodeSpec("mic", {"source": f"file:{silence}"}),
        NodeSpec("frontend", {"frontend": f"scripted:{script}"}),
        NodeSpec("harness", {"journal_path": str(work / "journal.sqlite3")}),
        NodeSpec("speaker", {"sink": f"file:{work / 'played.wav'}"}),
        NodeSpec("monitor"),
    ]
    counts = SoakCounts()
    memory: dict[str, list[float]] = {}
    fds: dict[str, list[float]] = {}
    exits: dict[str, object] = {}

    with probed_graph(nodes, "soak_probe") as graph:
        node, executor = graph.node, graph.executor

        def on_decision(msg: UnitDecision) -> None:
            index = int(msg.unit_index)
            if counts.first_unit is None:
                counts.first_unit = index
            elif index != counts.last_unit + 1:
                counts.gaps += 1
            counts.last_unit = index
            counts.decisions += 1
            counts.missed += bool(msg.deadline_missed)

        def on_event(msg: TimelineEvent) -> None:
            kind = msg.kind
            if kind == "task_state":
                p = json.loads(msg.payload_json)
                book = counts.harness_tasks if p.get("source") == "harness" else None
                book = counts.frontend_tasks if p.get("source") == "frontend" else book
                if book is not None and p.get("task_id"):
                    book[str(p["task_id"])] = str(p.get("state"))
            elif kind == "delegate_close":
                counts.delegations += 1
            elif kind == "protocol_error":
                counts.protocol_errors += 1
            elif kind == "frontend_error":
                counts.frontend_errors += 1
            elif kind == "playback_ack":
                counts.heard_words += len(
                    str(json.loads(msg.payload_json).get("heard", "")).split()
                )

        node.create_subscription(UnitDecision, TOPICS["decision"], on_decision, reliable(50))
        node.create_subscription(TimelineEvent, TOPICS["timeline"], on_event, reliable(1000))
        graph.supervisor.start()
        start = time.monotonic()
        next_sample = start
        while time.monotonic() - start < seconds:
            if not node.context.ok():  # Ctrl-C: rclpy shut the context down
                exits = {"soak": "interrupted"}
                break
            executor.spin_once(timeout_sec=0.05)
            if time.monotonic() >= next_sample:
                next_sample += SAMPLE_EVERY_S
                for name, proc in graph.supervisor.procs.items():
                    try:
                        p = psutil.Process(proc.pid)
                        memory.setdefault(name, []).append(p.memory_info().rss / 2**20)
                        fds.setdefault(name, []).append(p.num_fds())
                    except psutil.Error:
                        pass
            dead = {n: p.poll() for n, p in graph.supervisor.procs.items() if p.poll() is not None}
            if dead:
                exits = dead
                break
        elapsed = time.monotonic() - start
    harness_open, frontend_open = counts.not_final()
    lines = [
        f"bench soak: {elapsed / 60:.1f} min at real time, {counts.decisions} decisions "
        f"(units {counts.first_unit}..{counts.last_unit}, {counts.gaps} gaps), "
        f"{counts.missed} missed deadlines",
        f"delegations {counts.delegations}; harness tasks {len(counts.harness_tasks)} "
        f"({_states(counts.harness_tasks)}); frontend delegations {len(counts.frontend_tasks)} "
        f"({_states(counts.frontend_tasks)}); not final: harness {len(harness_open)}, "
        f"frontend {len(frontend_open)}",
        f"protocol errors {counts.protocol_errors}, frontend errors {counts.frontend_errors}, "
        f"words heard {counts.heard_words}",
    ]
    worst = 0.0
    for name in memory:
        mem_g, fd_g = growth(memory[name]), growth(fds[name])
        worst = max(worst, mem_g, fd_g)
        (m0, m1), (f0, f1) = windows(memory[name]), windows(fds[name])
        lines.append(
            f"  {name}: RSS {m0:.1f} -> {m1:.1f} MiB (growth {100 * mem_g:+.1f} %, peak "
            f"{max(memory[name]):.1f}), fds {f0:.0f} -> {f1:.0f} (growth {100 * fd_g:+.1f} %, "
            f"peak {max(fds[name]):.0f}); {len(memory[name])} samples"
        )
    if exits:
        lines.append(f"node(s) ended during the soak: {exits}")
    if graph.unclean:
        lines.append(f"unclean exits at stop: {graph.unclean}")
    ok = (
        not exits
        and counts.missed == 0
        and counts.gaps == 0
        and not harness_open
        and not frontend_open
        and worst < GROWTH_LIMIT
        and counts.delegations > 0
    )
    lines.append(f"goals (growth < 5 %, 0 missed, every task final): {'met' if ok else 'NOT met'}")
    report = "\n".join(lines)
    (work / "soak.txt").write_text(report + "\n", encoding="utf-8")
    (work / "samples.json").write_text(json.dumps({"rss_mib": memory, "fds": fds}), "utf-8")
    print(report)
    print(f"wrote {work / 'soak.txt'}")
    return 0 if ok else 1


def _states(book: dict[str, str]) -> str:
    tally: dict[str, int] = {}
    for state in book.values():
        tally[state] = tally.get(state, 0) + 1
    return ", ".join(f"{s} {n}" for s, n in sorted(tally.items())) or "none"
