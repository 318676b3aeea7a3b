"""meeple_mahjong.belief_probe: how well a public deal-in belief ranks the discards that deal in,
and what shifting the reference's discards by it (or by the oracle's labels) does, on the tiny
phase-2 run's phase-1 gate (its BC auxiliary danger head)."""

import json

import pytest
import torch

from meeple_mahjong import belief_probe


@pytest.fixture(scope="module")
def gates(mahjong_runs):
    g = mahjong_runs["phase2"] / "gates"
    return {name: g / f"{name}.pt" for name in ("phase1", "teacher")}


def test_auc_is_the_chance_a_positive_outscores_a_negative():
    torch.manual_seed(0)
    scores = torch.randint(0, 5, (60,)).float()  # many ties
    labels = torch.rand(60) < 0.4
    pos, neg = scores[labels], scores[~labels]
    brute = ((pos[:, None] > neg[None, :]).float() + 0.5 * (pos[:, None] == neg[None, :]).float()).mean()
    assert belief_probe.auc(scores, labels) == pytest.approx(float(brute))
    assert belief_probe.auc(labels.float(), labels) == 1.0
    assert belief_probe.auc(scores, torch.zeros(60, dtype=torch.bool)) != belief_probe.auc(scores, labels)  # nan


def test_within_decision_intervals_resample_decisions_and_pair_the_scorers():
    torch.manual_seed(1)
    n = 400
    dealing = torch.rand(n, 34) < 0.1
    safe = ~dealing & (torch.rand(n, 34) < 0.5)
    dealing[:, 0], dealing[:, 1] = True, False  # every decision offers both
    safe[:, 0], safe[:, 1] = False, True
    noisy = dealing.float() + torch.randn(n, 34)  # a belief with some signal
    worse = noisy + 2 * torch.randn(n, 34)  # the same belief with more noise: a paired, correlated scorer
    ci = belief_probe.within_intervals({"perfect": dealing.float(), "noisy": noisy, "worse": worse}, dealing, safe)
    assert ci["perfect"] == [1.0, 1.0]
    for name in ("noisy", "worse"):
        point = belief_probe._within(locals()[name], dealing, safe)
        lo, hi = ci[name]
        assert lo < point < hi and hi - lo < 0.1
        d_lo, d_hi = ci[f"{name} - perfect"]
        assert d_lo == pytest.approx(lo - 1) and d_hi == pytest.approx(hi - 1)  # the perfect scorer never varies
    # paired: every scorer is read on the same resampled decisions, so a scorer that ranks exactly as
    # another (a monotone transform) differs from it by zero in every resample
    paired = belief_probe.within_intervals({"noisy": noisy, "scaled": 2 * noisy + 1, "worse": worse}, dealing, safe)
    assert paired["scaled - noisy"] == [0.0, 0.0] and paired["scaled"][1] > paired["scaled"][0]
    assert paired["worse - noisy"][1] < 0  # the added noise costs ranking in (nearly) every resample
    assert belief_probe.within_intervals({"noisy": noisy}, dealing, safe, seed=5) != belief_probe.within_intervals(
        {"noisy": noisy}, dealing, safe, seed=6)  # fmt: skip


def test_the_probe_reads_the_bc_belief_and_prices_the_shifts(gates, tmp_path, capsys):
    out, png = tmp_path / "b.json", tmp_path / "b.png"
    argv = ["--belief", str(gates["phase1"]), "--tables", "8", "--steps", "60", "--seed", "3",
            "--out", str(out), "--plot", str(png)]  # fmt: skip
    assert belief_probe.main(argv) == 0
    r = json.loads(out.read_text())
    assert r["source"] == "BC auxiliary aux_danger" and r["decisions"] == 480 and r["choices"] > 0
    for key in ("auc_all", "auc_choices", "auc_within"):
        assert 0 <= r[key] <= 1
    for name in ("public", "oracle"):
        rows = r["curves"][name]
        assert rows[0]["w"] == 0 and rows[0]["kl_to_reference"] == pytest.approx(0, abs=1e-6)
        masses = [row["dealing_mass"] for row in rows]
        assert masses[0] == r["curves"]["public"][0]["dealing_mass"]  # both start at the reference
        assert all(b <= a + 1e-9 for a, b in zip(masses, masses[1:], strict=False))  # a shift away only lowers it
    assert r["curves"]["oracle"][-1]["dealing_mass"] < 0.5 * r["curves"]["oracle"][0]["dealing_mass"]
    printed = capsys.readouterr().out
    assert png.stat().st_size > 0 and "within a decision" in printed and "belief - rules" in printed
    assert sum(row["choices"] for row in r["by_threat"].values()) == r["choices"]
    assert 0 <= r["rules_tenpai_auc_within"] <= 1
    ci = r["intervals"]
    assert ci["belief"][0] <= r["auc_within"] <= ci["belief"][1] and ci["rules"][0] <= r["rules_auc_within"] <= ci["rules"][1]
    lo, hi = ci["belief - rules"]
    assert lo <= r["auc_within"] - r["rules_auc_within"] <= hi

    # the rules as the belief, on the same decisions, score what the network's run printed for them
    rules = tmp_path / "rules.json"
    assert belief_probe.main([*argv[2:8], "--belief", "rules", "--reference", str(gates["phase1"]), "--out", str(rules)]) == 0
    ruled = json.loads(rules.read_text())
    assert ruled["source"].startswith("public defence rules") and ruled["choices"] == r["choices"]
    assert ruled["auc_within"] == pytest.approx(r["rules_auc_within"]) == pytest.approx(ruled["rules_auc_within"])
    with pytest.raises(SystemExit) as refused:
        belief_probe.main(["--belief", "rules"])
    assert refused.value.code == 2 and "needs --reference" in capsys.readouterr().err
    # the teacher's gate has neither a danger head nor BC's auxiliary heads: one line
    assert belief_probe.main(["--belief", str(gates["teacher"]), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("meeple: error:") and "no belief to probe" in err and err.count("\n") == 1


def test_the_rules_read_genbutsu_suji_and_who_threatens():
    obs = torch.zeros(1, 84, 34)
    obs[0, 8 + 14 * 1 + 11] = 1  # opponent 1 (right) declared riichi
    obs[0, 64 + 0, 0] = 1  # 1m: genbutsu against it
    obs[0, 67 + 0, 3] = 1  # 4m: suji against it
    obs[0, 64 : 64 + 3, 8] = 1  # 9m: genbutsu against everyone
    obs[0, 8 + 14 * 2 + 9, 20] = 6 / 4  # opponent 2 has two calls (six tiles in melds)
    obs[0, 64 + 0, 30] = obs[0, 64 + 2, 30] = 1  # N: genbutsu against 1 and 3, not 2 (two calls)
    danger = belief_probe.rule_belief(obs)[0]
    assert danger[8] == 0 and danger[1] == pytest.approx(1.0)  # safe against all / live against riichi
    assert danger[3] == pytest.approx(0.4)  # suji cuts the riichi player's danger by 0.6
    assert danger[0] == pytest.approx(0.3) and danger[30] == pytest.approx(0.3)  # left: the two-call hand
    # who threatens, given instead (the probe's oracle tenpai flags): only the riichi player is tenpai,
    # so the two-call hand and the 0.05 floor drop out
    given = belief_probe.rule_belief(obs, threat=torch.tensor([[1.0, 0.0, 0.0]]))[0]
    assert given[0] == given[8] == given[30] == 0 and given[1] == 1 and given[3] == pytest.approx(0.4)
    obs[0, 64 + 1, 0] = 1  # 1m now genbutsu against the two-call hand too: only "anyone" (0.05) is left
    assert belief_probe.rule_belief(obs)[0, 0] == pytest.approx(0.05)


def test_the_curve_tool_reads_probes_by_step_and_refuses_what_it_cannot_place(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("belief_curve", Path(__file__).parents[1] / "tools" / "belief_curve.py")
    curve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(curve)
    for step, point in ((2000, 0.66), (1000, 0.64)):  # written out of order: the curve sorts by samples
        probe = {"belief": f"run/ckpt_phase0_step{step:08d}.pt", "auc_within": point, "rules_auc_within": 0.65,
                 "choices": 100, "intervals": {"belief": [point - 0.01, point + 0.01], "rules": [0.64, 0.66],
                                               "belief - rules": [point - 0.66, point - 0.64]}}  # fmt: skip
        (tmp_path / f"{step}.json").write_text(json.dumps(probe))
    png = tmp_path / "curve.png"
    assert curve.main([f"net={tmp_path}/*.json", "--batch", "512", "--out", str(png)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert [(r[0], r[1]) for r in rows] == [("512,000", "0.640"), ("1,024,000", "0.660")] and png.stat().st_size > 0
    (tmp_path / "x.json").write_text(json.dumps({"belief": "rules", "auc_within": 0.6}))
    with pytest.raises(SystemExit, match="names no step"):
        curve.main([f"net={tmp_path}/x.json", "--out", str(png)])
