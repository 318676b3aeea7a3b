"""A transition's gate: one condition or a list that must all hold (the mahjong phase-1 gate
checks held-out discard accuracy and a duplicate average rank together)."""

from __future__ import annotations

import json

import pytest

from meeple.config.schema import Gate, Transition, check_transition, gate_conditions
from meeple.errors import ConfigError, GateFailed
from meeple.pipeline.transition import check_gate

METRICS = {"val/accuracy_discard": 0.93, "eval/avg_rank": 2.41}
BOTH = [
    {"metric": "val/accuracy_discard", "op": ">=", "threshold": 0.9},
    {"metric": "eval/avg_rank", "op": "<=", "threshold": 2.55},
]


def _check(gates, tmp_path, metrics=METRICS):
    record = tmp_path / "phase0" / "gate.json"
    check_gate(gate_conditions(Transition(name="t", gate=gates)), metrics, tmp_path / "g.pt", record,
               previous_label="phase 0 (bc)", label="phase 1 (ppo)")
    return json.loads(record.read_text())


def test_one_condition_keeps_the_flat_record(tmp_path):
    record = _check(BOTH[0], tmp_path)
    assert record["passed"] and record["metric"] == "val/accuracy_discard" and record["value"] == 0.93


def test_every_condition_must_hold(tmp_path):
    record = _check(BOTH, tmp_path)
    assert record["passed"] and [c["metric"] for c in record["checks"]] == ["val/accuracy_discard", "eval/avg_rank"]
    worse = dict(METRICS, **{"eval/avg_rank": 2.7})
    with pytest.raises(GateFailed, match=r"^gate failed: phase 0 \(bc\) eval/avg_rank = 2\.7, needs <= 2\.55; "
                                         r"phase 1 \(ppo\) did not start$"):
        _check(BOTH, tmp_path, worse)
    record = json.loads((tmp_path / "phase0" / "gate.json").read_text())
    assert record["passed"] is False and [c["passed"] for c in record["checks"]] == [True, False]


def test_a_missing_metric_names_what_was_recorded(tmp_path):
    with pytest.raises(GateFailed, match=r"recorded no 'eval/avg_rank' .* recorded: val/accuracy_discard$"):
        _check(BOTH, tmp_path, {"val/accuracy_discard": 0.95})


@pytest.mark.parametrize("gate, message", [
    ([], r"transition\.gate=\[\] is not allowed"),
    ({"metric": "m", "op": "=="}, r"transition\.gate\.op='==' is not allowed; accepted: >=, >, <=, <"),
    ([BOTH[0], {"metric": "m", "thresold": 1}], r"transition\.gate\[1\]=.* is not allowed; accepted: \{metric"),
    ({"metric": "m", "threshold": "high"}, r"transition\.gate\.threshold='high' is not allowed; accepted: a float"),
])
def test_malformed_gates_are_refused(gate, message):
    with pytest.raises(ConfigError, match=message):
        check_transition(Transition(name="t", gate=gate))


def test_typed_gate_objects_pass_through():
    assert gate_conditions(Transition(name="t", gate=Gate(metric="m"))) == [Gate(metric="m")]
    assert gate_conditions(Transition(name="t")) == []
