"""meeple.phases.diagnostics: policy_drift tells a run whose changes add up from one whose
checkpoints only jitter or random-walk; gradient_agreement finds the batch at which a gradient's
signal equals its noise."""

import math

import pytest
import torch

from meeple.phases.diagnostics import policy_drift


def _runs(n=32, rows=400, actions=6):
    g = torch.Generator().manual_seed(0)
    base = torch.randn(rows, actions, generator=g)
    legal = torch.rand(rows, actions, generator=g) > 0.3
    legal[:, 0] = True

    def log_probs(logits):
        return logits.masked_fill(~legal, float("-inf")).log_softmax(-1)

    direction = torch.randn(rows, actions, generator=g)
    steady = [log_probs(base + 0.02 * (t + 1) * direction) for t in range(n)]  # one signal, adding up
    jitter = [log_probs(base + 0.1 * torch.randn(rows, actions, generator=g)) for _ in range(n)]  # no memory
    steps = 0.02 * torch.randn(n, rows, actions, generator=g).cumsum(0)
    walk = [log_probs(base + steps[t]) for t in range(n)]  # unbiased steps that add up
    return log_probs(base), steady, jitter, walk


def test_changes_that_add_up_stay_correlated_and_jitter_does_not():
    start, steady, jitter, _ = _runs()
    lags = [1, 4, 16]
    s, j = policy_drift(steady, start, lags), policy_drift(jitter, start, lags)
    assert all(c > 0.99 for c in s["lag_corr"])
    assert all(abs(c) < 0.1 for c in j["lag_corr"])
    # ... above and below what a random walk from the start would keep
    assert s["walk_corr"] == j["walk_corr"] and all(0.2 < w < 1 for w in s["walk_corr"])
    assert all(c > w for c, w in zip(s["lag_corr"], s["walk_corr"], strict=True))
    assert s["lag_corr"][-1] > s["walk_corr"][-1] + 0.2
    assert all(c < w - 0.5 for c, w in zip(j["lag_corr"], j["walk_corr"], strict=True))
    # a steady drift grows ~k^2 with the lag, a memoryless jitter does not grow
    assert s["lag_kl"][2] > 100 * s["lag_kl"][0]
    assert j["lag_kl"][2] < 1.2 * j["lag_kl"][0]
    assert s["to_start"][-1] > 100 * s["to_start"][0] and len(s["to_start"]) == len(steady)
    # illegal actions (-inf under both) add nothing and make no NaN
    assert all(math.isfinite(v) for v in s["to_start"] + s["lag_kl"] + j["lag_kl"])


def test_a_lag_longer_than_the_run_is_nan():
    start, steady, _, _ = _runs(n=4)
    out = policy_drift(steady, start, [1, 8])
    assert math.isfinite(out["lag_kl"][0]) and math.isnan(out["lag_kl"][1]) and math.isnan(out["lag_corr"][1])
    assert out["walk_corr"][0] == pytest.approx((sum(math.sqrt(t / (t + 1)) for t in (1, 2, 3))) / 3)


def test_a_random_walk_keeps_the_correlation_the_reference_predicts():
    start, _, _, walk = _runs()
    out = policy_drift(walk, start, [1, 4, 16])
    for c, w in zip(out["lag_corr"], out["walk_corr"], strict=True):
        assert abs(c - w) < 0.05, (out["lag_corr"], out["walk_corr"])


def test_gradient_agreement_finds_the_batch_where_signal_equals_noise():
    """Per-sample gradients G + noise with tr(S) / |G|^2 = 400: halves of n agree with cosine
    n / (n + 400), and each size recovers n0 ~ 400; a gradient of pure noise gives no agreement."""
    from meeple.phases.diagnostics import gradient_agreement

    g = torch.Generator().manual_seed(1)
    d, samples = 200, 8192
    mean = torch.randn(d, generator=g)
    mean *= 1 / mean.norm()  # |G|^2 = 1
    noise = torch.randn(samples, d, generator=g) * (400 / d) ** 0.5  # tr(S) = 400
    per_sample = mean + noise
    done = []
    out = gradient_agreement(lambda idx: per_sample[idx].mean(0), samples, [100, 400, 1600], repeats=16, generator=g,
                             on_progress=done.append)  # fmt: skip
    assert done == list(range(1, 49))
    for row in out:
        assert row["cos"] == pytest.approx(row["n"] / (row["n"] + 400), abs=0.06)
        assert 250 < row["n0"] < 650
    pure = gradient_agreement(lambda idx: noise[idx].mean(0), samples, [1600], repeats=16, generator=g)
    assert abs(pure[0]["cos"]) < 0.1
    with pytest.raises(ValueError, match="two disjoint halves"):
        gradient_agreement(lambda idx: noise[idx].mean(0), 100, [60])


def test_gradient_agreement_by_groups_does_not_count_shared_noise_as_signal():
    """Pure noise that 8 samples at a time share (the decisions of one game share its wall): halves
    of random samples agree through it, halves of whole groups do not."""
    from meeple.phases.diagnostics import gradient_agreement

    g = torch.Generator().manual_seed(2)
    d, groups = 200, 1024
    shared = torch.randn(groups, d, generator=g)
    group = torch.arange(groups).repeat_interleave(8)
    per_sample = shared[group] + 0.1 * torch.randn(len(group), d, generator=g)
    rows = gradient_agreement(lambda idx: per_sample[idx].mean(0), len(group), [2048], repeats=8, generator=g)
    tables = gradient_agreement(lambda idx: per_sample[idx].mean(0), len(group), [2048], repeats=8, generator=g,
                                groups=group)  # fmt: skip
    assert rows[0]["cos"] > 0.4 and abs(tables[0]["cos"]) < 0.1
    with pytest.raises(ValueError, match="a half of the groups"):
        gradient_agreement(lambda idx: per_sample[idx].mean(0), len(group), [4100], groups=group)
