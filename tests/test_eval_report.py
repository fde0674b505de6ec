"""Evaluation reports: files written, anchors and categories in the Markdown, compare's diff."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_eval_metrics import (  # hand-built runs shared with the metric tests
    idle_sample,
    run,
    sample,
)

from venus_ros.eval.metrics import MetricsConfig, compute_metrics
from venus_ros.eval.report import PLOTS, PUBLISHED, compare, flatten_numbers, write_report
from venus_ros.eval.scenario import CATEGORIES, ToolCall


def suite_metrics(frontend: str = "scripted", respond: bool = True) -> dict:
    ov = (3.0, 3.5)
    stop_then_answer = [(1.0, 4.0), (5.0, 6.0)]
    keep_talking = [(1.0, 9.0)]
    timer = ToolCall("set_timer", {"seconds": 600})
    runs = [
        run(
            sample("int_1", "interruption", overlap=ov, expected="respond"),
            stop_then_answer if respond else keep_talking,
        ),
        run(sample("int_2", "interruption", overlap=ov, expected="respond"), [(5.0, 6.0)]),
        run(sample("bc_1", "backchannel", overlap=ov, expected="resume"), keep_talking),
        run(sample("od_1", "other_directed", overlap=ov, expected="resume"), stop_then_answer),
        run(sample("bg_1", "background", overlap=ov, expected="resume"), keep_talking),
        run(sample("p_1", "pause", turns=((0.5, 2.0), (3.5, 5.0))), [(2.5, 3.0)]),
        run(sample("t_1", "turn_taking", turns=((0.5, 3.0),)), [(3.6, 5.0)]),
        run(sample("d_1", "delegation", needs_delegation=True), delegations=("weather",)),
        run(sample("d_2", "delegation", needs_delegation=False), error="frontend crashed"),
        run(sample("u_1", "tool_use", calls=(timer,)), tool_calls=(timer,)),
        run(idle_sample("oi_1", "other_directed_idle"), [(4.0, 5.0)] if respond else []),
        run(
            idle_sample("bi_1", "background_idle", request=(6.0, 7.0, "Is it raining?")),
            [(7.5, 8.0)],
        ),
    ]
    runs = [replace(r, unit_compute_s=(0.01, 0.02)) for r in runs]
    return compute_metrics(
        runs, frontend, "tests/data/mini", config=MetricsConfig(detector="energy")
    )


def test_write_report_writes_every_file(tmp_path: Path) -> None:
    metrics = suite_metrics()
    report = write_report(metrics, tmp_path / "out")
    assert report == tmp_path / "out" / "report.md"
    for name in ("report.md", "metrics.json", *PLOTS.values()):
        path = tmp_path / "out" / name
        assert path.is_file() and path.stat().st_size > 0, name
    for name in PLOTS.values():
        assert (tmp_path / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "out" / "metrics.json").read_text()) == metrics


def test_report_mentions_categories_anchors_plots_and_failures(tmp_path: Path) -> None:
    text = write_report(suite_metrics(), tmp_path).read_text()
    for category in CATEGORIES:
        assert category in text, category
    for key, value in PUBLISHED.items():
        assert f"{100 * value:.1f}%" in text, key
    for name in PLOTS.values():
        assert f"]({name})" in text
    assert "Realtime-Venus-Audio" in text
    # Measured values: interruption response 1 of 1 scored (int_2 was not speaking).
    assert "| `interruption.response_rate` | 100.0% | 75.0% |" in text
    assert "Not speaking at the overlap's start (1): `int_2`" in text
    assert "`d_2` (delegation): frontend crashed" in text
    assert "| other_directed_idle | 1 | 0 | 1 | 100.0% | 1.000 s | 0 | 0 | n/a | 0 (n/a) |" in text
    assert "| background_idle | 1 | 0 | 0 | 0.0% | n/a | 0 | 1 | 100.0% | 0 (0.0%) |" in text
    assert "| `idle.answered_rate` | 50.0% |" in text


def test_report_with_baselines_side_by_side(tmp_path: Path) -> None:
    main = suite_metrics("venus")
    never = suite_metrics("never_yield", respond=False)
    text = write_report(main, tmp_path, baselines=[never]).read_text()
    assert "| metric | venus | published | never_yield |" in text
    assert "| `interruption.response_rate` | 100.0% | 75.0% | 0.0% |" in text
    assert "baselines: never_yield" in text


def test_report_on_an_empty_result(tmp_path: Path) -> None:
    write_report(compute_metrics([], "nothing"), tmp_path)
    for name in PLOTS.values():
        assert (tmp_path / name).is_file()
    assert "n/a" in (tmp_path / "report.md").read_text()


def test_compare_lists_changed_metrics_with_delta() -> None:
    a = suite_metrics("venus")
    b = suite_metrics("never_yield", respond=False)
    text = compare(a, b)
    line = next(x for x in text.splitlines() if x.startswith("headline.interruption.response_rate"))
    assert line.split() == ["headline.interruption.response_rate", "1.0000", "0.0000", "-1.0000"]
    assert "A: venus (tests/data/mini)" in text and "B: never_yield" in text
    # Unchanged metrics are not listed; the count line counts them.
    assert "headline.backchannel.continuation_rate" not in text
    assert text.splitlines()[-1].endswith(" differ.")


def test_compare_handles_missing_and_undefined_values() -> None:
    a = suite_metrics()
    b = copy.deepcopy(a)
    del b["compute"]["p99_ms"]
    b["headline"]["new.metric"] = 3
    b["compute"]["missed_deadlines"] = a["compute"]["missed_deadlines"] + 2
    b["headline"]["tool_use.pass_at_1"] = None
    lines = {line.split()[0]: line.split() for line in compare(a, b).splitlines() if line}
    assert lines["compute.p99_ms"][1:] == [f"{a['compute']['p99_ms']:.4f}", "(missing)"]
    assert lines["headline.new.metric"][1:] == ["(missing)", "3"]
    assert lines["compute.missed_deadlines"][-1] == "+2"
    assert lines["headline.tool_use.pass_at_1"][1:] == ["1.0000", "n/a"]
    assert "4 differ." in compare(a, b)
    assert compare(a, a).splitlines()[-1].endswith(", 0 differ.")
    full = compare(a, a, only_changed=False)
    assert "headline.interruption.response_rate" in full


def test_flatten_numbers_skips_lists_strings_and_booleans() -> None:
    flat = dict(flatten_numbers({"a": {"b": 1, "c": [1, 2], "d": "x", "e": True, "f": None}}))
    assert flat == {"a.b": 1, "a.f": None}


def test_published_anchors_are_read_only() -> None:
    with pytest.raises(TypeError):
        PUBLISHED["interruption.response_rate"] = 1.0  # type: ignore[index]
