"""Evaluation reports: Markdown with PNG plots and JSON, and a readable diff of two results.

:func:`write_report` turns the dict of :func:`venus_ros.eval.metrics.compute_metrics` into
``metrics.json``, ``report.md`` and four plots (per-category rates against the published anchors,
latency CDFs, delegation confusion matrices, tool-use bars), with baselines side by side when
given. :func:`compare` lists the numeric differences between two results. matplotlib is imported
lazily, with the Agg backend, only when plots are drawn.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from venus_ros.eval.scenario import IDLE_CATEGORIES

__all__ = [
    "ANCHOR_SOURCE",
    "PLOTS",
    "PUBLISHED",
    "RATE_METRICS",
    "compare",
    "flatten_numbers",
    "write_report",
]

#: Published anchors: Realtime-Venus-Audio on Full-Duplex-Bench v1.5 (and its tool-use and
#: delegation results). Keys equal the ``headline`` keys of the metrics they anchor; the keys
#: with a suffix after the metric are alternative operating points or other systems.
PUBLISHED: Mapping[str, float] = MappingProxyType(
    {
        "interruption.response_rate": 0.75,
        "backchannel.continuation_rate": 0.97,
        "other_directed.continuation_rate": 0.88,
        "background.continuation_rate": 0.86,
        "delegation.recall": 0.92,
        "delegation.specificity": 0.39,
        "delegation.recall.alt_operating_point": 0.67,
        "delegation.specificity.alt_operating_point": 0.84,
        "tool_use.selection_f1": 0.86,
        "tool_use.pass_at_1": 0.43,
        "tool_use.pass_at_1.gpt_realtime": 0.60,
    }
)

#: Where the anchors come from, as the report states it.
ANCHOR_SOURCE = (
    "Realtime-Venus-Audio on Full-Duplex-Bench v1.5: responds to 75% of interruptions; continues "
    "through 97% of backchannels, 88% of other-directed speech, 86% of background speech; "
    "delegation recall 92% at 39% specificity (or 84% specificity with a third of needed "
    "delegations missed, shown as the alternative operating point); tool-selection F1 86%, "
    "Pass@1 43% (GPT-Realtime: 60%)."
)

#: The rate metrics of the rates chart, in order, with their labels.
RATE_METRICS: tuple[tuple[str, str], ...] = (
    ("interruption.response_rate", "interruption\nresponse"),
    ("backchannel.continuation_rate", "backchannel\ncontinuation"),
    ("other_directed.continuation_rate", "other-directed\ncontinuation"),
    ("background.continuation_rate", "background\ncontinuation"),
    ("pause.takeover_rate", "pause\ntakeover (lower\nis better)"),
    ("turn_taking.response_rate", "turn-taking\nresponse"),
    ("idle.answered_rate", "idle speech\nanswered (lower\nis better)"),
    ("delegation.recall", "delegation\nrecall"),
    ("delegation.specificity", "delegation\nspecificity"),
    ("tool_use.selection_f1", "tool selection\nF1"),
    ("tool_use.pass_at_1", "tool use\nPass@1"),
)

#: The plot files :func:`write_report` writes, by topic.
PLOTS: Mapping[str, str] = MappingProxyType(
    {
        "rates": "rates.png",
        "latency": "latency_cdf.png",
        "delegation": "delegation_confusion.png",
        "tool_use": "tool_use.png",
    }
)

_OVERLAP = ("interruption", "backchannel", "other_directed", "background")


# --- formatting -----------------------------------------------------------------------------


def _pct(value: Any) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _sec(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f} s"


def _num(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    return f"{value:.4f}"


def _fmt_metric(key: str, value: Any) -> str:
    if key.endswith(("_rate", ".recall", ".specificity", "_f1", "pass_at_1", "_accuracy")):
        return _pct(value)
    if key.endswith("_s"):
        return _sec(value)
    if key.endswith("_ms"):
        return "n/a" if value is None else f"{value:.2f} ms"
    return _num(value)


def _label(metrics: Mapping[str, Any]) -> str:
    return str(metrics.get("frontend") or "run")


def _get(metrics: Mapping[str, Any], *path: str) -> Any:
    node: Any = metrics
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


# --- plots --------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _legend_below(ax: Any) -> None:
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, frameon=False)


def _grouped_bars(
    ax: Any, runs: Sequence[Mapping[str, Any]], section: str, keys: Sequence[str]
) -> None:
    """One group of bars per key (``metrics[section][key]``), one bar per run; "n/a" where a
    run has no value."""
    width = 0.8 / len(runs)
    for i, metrics in enumerate(runs):
        xs, ys = [], []
        for j, key in enumerate(keys):
            value = _get(metrics, section, key)
            x = j - 0.4 + width * (i + 0.5)
            if value is None:
                ax.text(x, 0.02, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
            else:
                xs.append(x)
                ys.append(value)
        ax.bar(xs, ys, width=width * 0.95, label=_label(metrics))


def _plot_rates(plt: Any, runs: Sequence[Mapping[str, Any]], path: Path) -> None:
    keys = [k for k, _ in RATE_METRICS]
    fig, ax = plt.subplots(figsize=(13, 5.5))
    _grouped_bars(ax, runs, "headline", keys)
    anchors = [(j, PUBLISHED[k]) for j, k in enumerate(keys) if k in PUBLISHED]
    if anchors:
        ax.scatter(
            [j for j, _ in anchors],
            [v for _, v in anchors],
            marker="_",
            s=900,
            linewidths=3,
            color="black",
            zorder=5,
            label="published (Realtime-Venus-Audio)",
        )
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([label for _, label in RATE_METRICS], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("rate")
    ax.set_title("Per-category rates against the published anchors")
    _legend_below(ax)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _cdf(ax: Any, values: Sequence[float], label: str, style: str = "-") -> None:
    data = sorted(values)
    ys = [(i + 1) / len(data) for i in range(len(data))]
    ax.step([data[0], *data], [0.0, *ys], where="post", linestyle=style, label=label)


def _plot_latency(plt: Any, runs: Sequence[Mapping[str, Any]], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    main, *others = runs
    panels = (
        ("stop_latency_s", "Stop latency (overlap start to assistant stop)"),
        ("response_latency_s", "Response latency (overlap end to new speech)"),
    )
    for ax, (field, title) in zip(axes, panels, strict=True):
        drawn = 0
        for category in _OVERLAP:
            values = _get(main, "overlap", category, field, "values") or []
            if values:
                _cdf(ax, values, f"{category} (n={len(values)})")
                drawn += 1
        if field == "response_latency_s":
            values = _get(main, "turn_taking", "latency_s", "values") or []
            if values:
                _cdf(ax, values, f"turn_taking, after last turn (n={len(values)})", ":")
                drawn += 1
        for metrics in others:
            values = _get(metrics, "overlap", "all", field, "values") or []
            if values:
                _cdf(ax, values, f"{_label(metrics)}: all overlaps (n={len(values)})", "--")
                drawn += 1
        if not drawn:
            ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
        else:
            ax.legend(fontsize=7, loc="lower right")
        ax.set_title(f"{title}\n{_label(main)}", fontsize=9)
        ax.set_xlabel("seconds")
        ax.set_ylabel("share of samples")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_confusion(plt: Any, runs: Sequence[Mapping[str, Any]], path: Path) -> None:
    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 4), squeeze=False)
    for ax, metrics in zip(axes[0], runs, strict=True):
        c = _get(metrics, "delegation", "confusion") or {}
        grid = [[c.get("tp", 0), c.get("fn", 0)], [c.get("fp", 0), c.get("tn", 0)]]
        top = max(1, max(max(row) for row in grid))
        ax.imshow(grid, cmap="Blues", vmin=0, vmax=top)
        names = [["TP", "FN"], ["FP", "TN"]]
        for r in range(2):
            for k in range(2):
                dark = grid[r][k] > top / 2
                ax.text(
                    k,
                    r,
                    f"{names[r][k]}\n{grid[r][k]}",
                    ha="center",
                    va="center",
                    color="white" if dark else "black",
                )
        ax.set_xticks([0, 1])
        ax.set_xticklabels(["delegated", "kept"])
        ax.set_yticks([0, 1])
        ax.set_yticklabels(["needs\ndelegation", "does not"])
        recall = _pct(_get(metrics, "delegation", "recall"))
        spec = _pct(_get(metrics, "delegation", "specificity"))
        ax.set_title(f"{_label(metrics)}\nrecall {recall}, specificity {spec}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_tools(plt: Any, runs: Sequence[Mapping[str, Any]], path: Path) -> None:
    keys = (
        ("selection_precision", "selection\nprecision"),
        ("selection_recall", "selection\nrecall"),
        ("selection_f1", "selection\nF1"),
        ("pass_at_1", "Pass@1"),
        ("argument_accuracy", "argument\naccuracy"),
    )
    fig, ax = plt.subplots(figsize=(9, 5))
    _grouped_bars(ax, runs, "tool_use", [key for key, _ in keys])
    ax.scatter(
        [2, 3], [PUBLISHED["tool_use.selection_f1"], PUBLISHED["tool_use.pass_at_1"]],
        marker="_", s=900, linewidths=3, color="black", zorder=5,
        label="published (Realtime-Venus-Audio)",
    )  # fmt: skip
    ax.scatter(
        [3], [PUBLISHED["tool_use.pass_at_1.gpt_realtime"]],
        marker="_", s=900, linewidths=3, color="grey", zorder=5, label="GPT-Realtime Pass@1",
    )  # fmt: skip
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([label for _, label in keys], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_title("Tool use")
    _legend_below(ax)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --- report ---------------------------------------------------------------------------------


def _headline_section(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    main, *baselines = runs
    keys = list(_get(main, "headline") or {})
    header = ["metric", _label(main), "published", *(_label(b) for b in baselines)]
    rows = []
    for key in keys:
        row = [f"`{key}`", _fmt_metric(key, _get(main, "headline", key))]
        row.append(_pct(PUBLISHED[key]) if key in PUBLISHED else "")
        row.extend(_fmt_metric(key, _get(b, "headline", key)) for b in baselines)
        rows.append(row)
    return _table(header, rows)


def _overlap_section(metrics: Mapping[str, Any]) -> list[str]:
    header = [
        "category", "n", "scored", "not speaking", "errors", "labels (respond / resume / "
        "uncertain / unknown)", "acoustic (respond / resume / stop)", "response rate",
        "continuation rate", "correct", "stop p50 / p90", "response p50 / p90",
        "FDB double talk p50", "FDB response gap p50",
    ]  # fmt: skip
    rows = []
    for category in (*_OVERLAP, "all"):
        block = _get(metrics, "overlap", category) or {}
        outcomes = block.get("outcomes", {})
        stop = block.get("stop_latency_s", {})
        resp = block.get("response_latency_s", {})
        rows.append(
            [
                category,
                _num(block.get("n", 0)),
                _num(block.get("scored", 0)),
                _num(block.get("not_speaking", 0)),
                _num(block.get("errors", 0)),
                " / ".join(
                    _num(block.get("labels", {}).get(k, 0))
                    for k in ("respond", "resume", "uncertain", "unknown")
                ),
                " / ".join(_num(outcomes.get(k, 0)) for k in ("respond", "resume", "stop")),
                _pct(block.get("response_rate")),
                _pct(block.get("continuation_rate")),
                _pct(block.get("correct_rate")),
                f"{_sec(stop.get('p50'))} / {_sec(stop.get('p90'))}",
                f"{_sec(resp.get('p50'))} / {_sec(resp.get('p90'))}",
                _sec(block.get("fdb_stop_s", {}).get("p50")),
                _sec(block.get("fdb_resp_s", {}).get("p50")),
            ]
        )
    return _table(header, rows)


def _idle_section(metrics: Mapping[str, Any]) -> list[str]:
    header = [
        "category", "n", "errors", "answered", "answered rate (lower is better)",
        "answer latency p50", "remark delegated", "with a request", "request response rate",
        "merged into the request",
    ]  # fmt: skip
    rows = []
    for category in (*IDLE_CATEGORIES, "all"):
        block = _get(metrics, "idle", category) or {}
        rows.append(
            [
                category,
                _num(block.get("n", 0)),
                _num(block.get("errors", 0)),
                _num(block.get("answered", 0)),
                _pct(block.get("answered_rate")),
                _sec((block.get("answer_latency_s") or {}).get("p50")),
                _num(block.get("remark_delegated", 0)),
                _num(block.get("with_request", 0)),
                _pct(block.get("request_response_rate")),
                f"{_num(block.get('merged', 0))} ({_pct(block.get('merged_rate'))})",
            ]
        )
    return _table(header, rows)


def _latency_cell(row: Mapping[str, Any]) -> str:
    for key in ("response_latency_s", "turn_latency_s", "idle_answer_latency_s"):
        if row.get(key) is not None:
            return _sec(row[key])
    return ""


def _render(runs: Sequence[Mapping[str, Any]], out_dir: Path) -> str:
    main = runs[0]
    cfg = main.get("config", {})
    per_sample = main.get("per_sample", [])
    lines = [
        f"# Evaluation report: {_label(main)}",
        "",
        f"- suite: `{main.get('suite') or 'n/a'}`",
        f"- samples: {main.get('n_samples', 0)} "
        + "("
        + ", ".join(f"{k}: {v}" for k, v in (main.get("categories") or {}).items())
        + ")",
        f"- failed samples (counted as failures in every rate): {len(main.get('errors', []))}",
        f"- baselines: {', '.join(_label(b) for b in runs[1:]) or 'none'}",
        f"- metrics version {main.get('version')}; definitions in `docs/eval.md`",
        "",
        "## Headline against the published anchors",
        "",
        f"Published anchors: {ANCHOR_SOURCE}",
        "",
        *_headline_section(runs),
        "",
        "Alternative anchors: "
        + "; ".join(f"`{k}` {_pct(v)}" for k, v in PUBLISHED.items() if k.count(".") > 1),
        "",
        f"![per-category rates]({PLOTS['rates']})",
        "",
        "## Overlap behaviour (backchannel, interruption, other_directed, background)",
        "",
        f"Voice activity on the played audio: the {cfg.get('detector')} detector, assistant "
        f"segments merged across gaps up to {cfg.get('assistant_merge_s')} s (FDB); rates by "
        f"{main.get('overlap_basis', 'acoustic')} (content: the judge's labels; acoustic: did "
        "the speech stop and start again); speaking at the overlap with "
        f"{cfg.get('speaking_tolerance_s')} s tolerance, or an onset up to "
        f"{cfg.get('pause_s')} s into a pause of the turn; a stop counts up to "
        f"{cfg.get('stop_window_s')} s after the overlap ends (inclusive), a new response up to "
        f"{cfg.get('response_window_s')} s after it. Samples where the assistant was not "
        "speaking at the overlap's start are excluded from the rates and counted here.",
        "",
        *_overlap_section(main),
        "",
    ]
    silent = [r["id"] for r in per_sample if r.get("outcome") == "not_speaking"]
    lines += [
        f"Not speaking at the overlap's start ({len(silent)}): "
        + (", ".join(f"`{i}`" for i in silent) or "none"),
        "",
        f"![latency CDFs]({PLOTS['latency']})",
        "",
        "## Pause handling (pause)",
        "",
    ]
    pause = main.get("pause", {})
    lines += _table(
        ["n", "scored", "no pause found", "errors", "takeovers", "takeover rate (lower is better)"],
        [
            [
                _num(pause.get("n", 0)),
                _num(pause.get("scored", 0)),
                _num(pause.get("no_pause", 0)),
                _num(pause.get("errors", 0)),
                _num(pause.get("takeovers", 0)),
                _pct(pause.get("takeover_rate")),
            ]
        ],
    )
    turn = main.get("turn_taking", {})
    latency = turn.get("latency_s", {})
    lines += ["", "## Turn taking (turn_taking)", ""]
    lines += _table(
        ["n", "scored", "errors", "responded", "response rate", "latency p50 / p90"],
        [
            [
                _num(turn.get("n", 0)),
                _num(turn.get("scored", 0)),
                _num(turn.get("errors", 0)),
                _num(turn.get("responded", 0)),
                _pct(turn.get("response_rate")),
                f"{_sec(latency.get('p50'))} / {_sec(latency.get('p90'))}",
            ]
        ],
    )
    lines += ["", "## Speech not addressed to the silent assistant (idle categories)", ""]
    lines += _idle_section(main)
    lines += [
        "",
        f"Answered: assistant speech starting from the remark's start to "
        f"{cfg.get('idle_window_s')} s after its end (or to the next request, if sooner); "
        "lower is better, a failed sample counts as answered. Merged: a delegated query holds "
        "at least a third of the remark's own content-word stems and one of the request's.",
    ]
    deleg = main.get("delegation", {})
    c = deleg.get("confusion", {})
    lines += ["", "## Delegation (delegation)", ""]
    lines += _table(
        ["", "delegated", "kept"],
        [
            ["needs delegation", f"TP {c.get('tp', 0)}", f"FN {c.get('fn', 0)}"],
            ["does not", f"FP {c.get('fp', 0)}", f"TN {c.get('tn', 0)}"],
        ],
    )
    lines += [
        "",
        f"Recall {_pct(deleg.get('recall'))} (published {_pct(PUBLISHED['delegation.recall'])}), "
        f"specificity {_pct(deleg.get('specificity'))} "
        f"(published {_pct(PUBLISHED['delegation.specificity'])}), "
        f"precision {_pct(deleg.get('precision'))}, accuracy {_pct(deleg.get('accuracy'))}; "
        f"failed samples: {deleg.get('errors', 0)}.",
        "",
        f"![delegation confusion matrices]({PLOTS['delegation']})",
        "",
        "## Tool use (tool_use)",
        "",
    ]
    tools = main.get("tool_use", {})
    lines += _table(
        ["n", "TP", "FP", "FN", "precision", "recall", "selection F1", "Pass@1", "argument acc."],
        [
            [
                _num(tools.get("n", 0)),
                _num(tools.get("tp", 0)),
                _num(tools.get("fp", 0)),
                _num(tools.get("fn", 0)),
                _pct(tools.get("selection_precision")),
                _pct(tools.get("selection_recall")),
                _pct(tools.get("selection_f1")),
                _pct(tools.get("pass_at_1")),
                _pct(tools.get("argument_accuracy")),
            ]
        ],
    )
    lines += [
        "",
        f"Published: selection F1 {_pct(PUBLISHED['tool_use.selection_f1'])}, Pass@1 "
        f"{_pct(PUBLISHED['tool_use.pass_at_1'])} (GPT-Realtime "
        f"{_pct(PUBLISHED['tool_use.pass_at_1.gpt_realtime'])}).",
        "",
        f"![tool use]({PLOTS['tool_use']})",
        "",
        "## Compute",
        "",
    ]
    comp = main.get("compute", {})
    lines += _table(
        ["units", "p50", "p99", "max", "missed deadlines"],
        [
            [
                _num(comp.get("units", 0)),
                _fmt_metric("p50_ms", comp.get("p50_ms")),
                _fmt_metric("p99_ms", comp.get("p99_ms")),
                _fmt_metric("max_ms", comp.get("max_ms")),
                _num(comp.get("missed_deadlines", 0)),
            ]
        ],
    )
    errors = main.get("errors", [])
    lines += ["", f"## Failed samples ({len(errors)})", ""]
    if errors:
        lines += [f"- `{e['id']}` ({e['category']}): {e['error']}" for e in errors]
    else:
        lines.append("none")
    lines += ["", "## Per sample", ""]
    lines += _table(
        ["id", "category", "expected", "outcome", "correct", "stop", "response"],
        [
            [
                f"`{r['id']}`",
                r["category"],
                r.get("expected") or "",
                str(r.get("outcome") or ""),
                "" if r.get("correct") is None else ("yes" if r["correct"] else "no"),
                "" if r.get("stop_latency_s") is None else _sec(r["stop_latency_s"]),
                _latency_cell(r),
            ]
            for r in per_sample
        ],
    )
    lines += ["", f"Full numbers: `metrics.json` in `{out_dir.name}/`.", ""]
    return "\n".join(lines)


def write_report(
    metrics: Mapping[str, Any],
    out_dir: Path,
    baselines: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """Write ``metrics.json``, ``report.md`` and the PNG plots into ``out_dir``.

    Args:
        metrics: a result of :func:`venus_ros.eval.metrics.compute_metrics`.
        out_dir: the report folder (created if missing).
        baselines: other results on the same suite, shown side by side.

    Returns:
        The path of ``report.md``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = [metrics, *baselines]
    (out_dir / "metrics.json").write_text(
        json.dumps(metrics, indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    plt = _pyplot()
    _plot_rates(plt, runs, out_dir / PLOTS["rates"])
    _plot_latency(plt, runs, out_dir / PLOTS["latency"])
    _plot_confusion(plt, runs, out_dir / PLOTS["delegation"])
    _plot_tools(plt, runs, out_dir / PLOTS["tool_use"])
    report = out_dir / "report.md"
    report.write_text(_render(runs, out_dir), encoding="utf-8")
    return report


# --- compare --------------------------------------------------------------------------------


def flatten_numbers(metrics: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """The numeric leaves of nested dicts as ``(dotted path, value)``, None included.

    Lists (per-sample rows, latency values, error lists) and strings are skipped; booleans are
    not numbers.
    """
    for key, value in metrics.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten_numbers(value, path + ".")
        elif value is None or (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ):
            yield path, value


def _equal(x: Any, y: Any) -> bool:
    """Both present and equal (None equals None; numbers within 1e-12)."""
    if x is ... or y is ...:
        return False
    if x is None or y is None:
        return x is y
    return x == y or math.isclose(x, y, rel_tol=0.0, abs_tol=1e-12)


def compare(a: Mapping[str, Any], b: Mapping[str, Any], *, only_changed: bool = True) -> str:
    """A text table of the numeric metrics that differ between two results.

    Args:
        a: the first result (``A``).
        b: the second result (``B``).
        only_changed: list only the metrics whose values differ (or exist on one side only).

    Returns:
        Lines ``metric  A  B  delta`` (delta = B - A; ``n/a`` for an undefined value,
        ``(missing)`` when one side lacks the metric), then a count line.
    """
    left = dict(flatten_numbers(a))
    right = dict(flatten_numbers(b))
    paths = list(left) + [p for p in right if p not in left]
    rows: list[tuple[str, str, str, str]] = []
    changed = 0
    for path in paths:
        x = left.get(path, ...)
        y = right.get(path, ...)
        if _equal(x, y):
            if only_changed:
                continue
        else:
            changed += 1
        delta = ""
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            d = y - x
            delta = f"{d:+d}" if isinstance(d, int) else f"{d:+.4f}"
        rows.append(
            (
                path,
                "(missing)" if x is ... else _num(x),
                "(missing)" if y is ... else _num(y),
                delta,
            )
        )
    header = ("metric", "A", "B", "delta")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    fmt = f"{{:<{widths[0]}}}  {{:>{widths[1]}}}  {{:>{widths[2]}}}  {{:>{widths[3]}}}"
    out = [
        f"A: {_label(a)} ({a.get('suite') or 'n/a'})",
        f"B: {_label(b)} ({b.get('suite') or 'n/a'})",
        "",
        fmt.format(*header).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    out.extend(fmt.format(*row).rstrip() for row in rows)
    out += ["", f"{len(paths)} numeric metrics compared, {changed} differ."]
    return "\n".join(out)
