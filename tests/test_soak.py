"""The soak's pure parts (``venus-ros bench soak`` itself runs for an hour, outside CI)."""

from __future__ import annotations

import yaml

from venus_ros.bench.soak import CYCLE_UNITS, growth, soak_script, windows
from venus_ros.frontends.scripted import Script


def test_the_soak_script_is_a_valid_script_that_delegates_every_cycle() -> None:
    script = Script.model_validate(yaml.safe_load(soak_script(10 * CYCLE_UNITS)))
    delegations = [r for r in script.replies if "<delegate>" in r.text]
    assert len(delegations) == 3 * 10
    assert sum(r.on_backend for r in script.replies) == len(delegations)  # each answer spoken
    assert any("timer" in r.text for r in delegations)


def test_growth_compares_the_late_fifth_with_the_samples_after_warm_up() -> None:
    flat = [10.0] * 5 + [100.0] * 95  # start-up, then flat
    assert growth(flat) == 0.0 and windows(flat) == (100.0, 100.0)
    leaking = [100.0 + i for i in range(100)]
    assert 0.5 < growth(leaking) < 0.9
    assert growth([1.0, 2.0]) == 0.0  # too few samples to say
