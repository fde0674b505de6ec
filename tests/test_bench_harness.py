"""``venus-ros bench harness`` at toy sizes: it runs end to end and prints its three figures.

No timing is asserted (the figures depend on the machine); the real node set is started, so the
probe's pairing of ``delegate_close`` with the harness's RUNNING must find delegations.
"""

from __future__ import annotations

import re

import pytest

from venus_ros.bench.harness import bench_harness


def test_bench_harness_runs_and_prints_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_harness(tasks=4, heavy=2, seconds=2.0) == 0
    out = capsys.readouterr().out
    figure = r"p50 [\d.]+ ms, p99 [\d.]+ ms, max [\d.]+ ms"
    verdict = r"goal p99 <= \d+ ms: (met|NOT met)"
    assert re.search(rf"</delegate> -> RUNNING latency over ROS .*: {figure} \({verdict}\)", out)
    assert re.search(rf"submit -> RUNNING in process .*: {figure} \({verdict}\)", out)
    assert re.search(r"throughput with 4 concurrent tasks .*: \d+ tasks/s over \d+ rounds", out)
    jitter = re.findall(rf"foreground unit-boundary jitter, 2 CPU-heavy .*: {figure}", out)
    assert len(jitter) == 2, out
    assert re.search(r"ROS \d+ s window, [1-9]\d* delegations paired", out), out
