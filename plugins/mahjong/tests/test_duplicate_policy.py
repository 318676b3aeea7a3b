"""A learned policy in the 1v3 duplicate: BatchSim's explicit games replay exactly what a
plain Python loop over Game + the bots' seat streams plays, PolicyTable's bookkeeping, and a
PPO checkpoint from ``python train.py env=mahjong debug=tiny`` evaluated end to end."""

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

import meeple_mahjong as mj
from meeple.checkpoint.io import CheckpointError, ChecksumMismatch, save_atomic
from meeple.nets.planes import build_planes_actor_critic
from meeple_mahjong import duplicate as dup
from meeple_mahjong import policy, tables
from meeple_mahjong.batch_env import MahjongEnv
from meeple_mahjong.env import backend
from meeple_mahjong.policy import (
    PolicyTable,
    greedy_policy,
    load_policy_actor,
    policy_from_checkpoint,
    random_policy,
)
from meeple_native import mahjong as _mj

TRAIN = str(Path(__file__).resolve().parents[3] / "train.py")


def first_legal(obs, mask):
    """A deterministic stand-in policy: the lowest legal action index."""
    return mask.to(torch.int8).argmax(-1)


def last_legal(obs, mask):
    """A second stand-in policy: the highest legal action index."""
    return (mask.shape[-1] - 1) - mask.flip(-1).to(torch.int8).argmax(-1)


def reference_game(job, **rules):
    """The job played by a plain Python loop: "policy" seats take the first legal index,
    "last" seats the last one,
    bots draw from BotStream(seat_stream_seed(policy_seed, seat)), stats counted by hand."""
    g = mj.Game(**rules)
    g.reset(job.session_seed, job.game_index)
    streams = [_mj.BotStream(_mj.seat_stream_seed(job.policy_seed, s)) for s in range(4)]
    riichi, calls, melds = [0] * 4, [0] * 4, [0] * 4
    while not g.is_done():
        seat = g.pending()[0]
        if job.players[seat] in ("policy", "last"):
            legal = np.flatnonzero(mj.legal_mask(g, seat))
            index = int(legal[0] if job.players[seat] == "policy" else legal[-1])
            action = mj.action_from_index(g, seat, index)
        else:
            action = streams[seat].act(g, seat, job.players[seat])
        g.step(seat, action)
        riichi[seat] += action.type == "riichi"
        for s in range(4):  # a call happened when an open meld appears
            m = g.melds(s)
            calls[s] += len(m) > melds[s] and m[-1][0] != "ankan"
            melds[s] = len(m)
    scores, wins = list(g.scores), g.wins()
    order = sorted(range(4), key=lambda s: (-scores[s], s))
    return [
        tables.SeatResult(
            score=scores[s],
            rank=order.index(s) + 1,
            hands=g.hands_played,
            wins=sum(w["winner"] == s for w in wins),
            tsumo=sum(w["winner"] == s and w["loser"] == -1 for w in wins),
            deal_ins=sum(w["loser"] == s for w in wins),
            riichi=riichi[s],
            calls=calls[s],
        )
        for s in range(4)
    ]


def test_the_reference_loop_is_play_bots():
    # The reference must be exact for the bots before it can judge the simulator.
    for players in (("rule", "random", "rule", "rule-nofold"), ("random",) * 4):
        job = tables.GameJob(3, 2, players, 77)
        assert reference_game(job) == tables.BotTable().play([job])[0]


JOBS = [
    *(job for g in (0, 1) for _, job in dup.rotations(11, g, "policy", "rule")),
    tables.GameJob(4, 9, ("random", "policy", "rule-nofold", "policy"), 123),  # two policy seats
    tables.GameJob(4, 9, ("rule", "random", "rule", "rule"), 5),  # no policy seat: BotTable
]


def test_explicit_games_replay_the_reference_game_by_game():
    table = PolicyTable(first_legal)
    results = table.play(JOBS)
    for job, res in zip(JOBS, results, strict=True):
        assert res == reference_game(job), job
    assert table.decisions["policy"] > 0
    # Batched: one call serves the pending decisions of every table of every seat group.
    assert table.forwards["policy"] < table.decisions["policy"] / 3


def test_several_networks_each_play_their_own_seats():
    jobs = [
        *(job for _, job in dup.rotations(6, 1, "last", "policy")),  # one network against another
        tables.GameJob(2, 4, ("policy", "rule", "last", "last"), 9),  # two networks and a bot
        tables.GameJob(2, 5, ("rule", "last", "random", "rule"), 8),
    ]
    table = PolicyTable({"policy": first_legal, "last": last_legal}, east_only=True)
    for job, res in zip(jobs, table.play(jobs), strict=True):
        assert res == reference_game(job, east_only=True), job
    # at most one forward per network per step, each serving every table's pending decisions
    assert max(table.forwards.values()) <= table.steps < sum(table.decisions.values())
    assert sum(table.forwards.values()) > table.steps  # both networks were called within steps
    with pytest.raises(ValueError, match=r"policy names \['rule'\] are not allowed"):
        PolicyTable({"rule": first_legal})


def test_results_do_not_depend_on_batching_or_threads():
    together = PolicyTable(first_legal, threads=2, east_only=True).play(JOBS)
    one_by_one = [PolicyTable(first_legal, east_only=True).play([job])[0] for job in JOBS]
    assert together == one_by_one


def test_a_deterministic_policy_against_copies_of_itself_ranks_exactly_2_5():
    table = PolicyTable(first_legal, east_only=True)
    s = dup.run_duplicate(table, "policy", "policy", games=2, seed=3).summary()
    assert s["challenger"]["avg_rank"] == 2.5 and s["challenger"]["rank_rates"] == [0.25] * 4


def test_uniform_random_policy_ranks_like_the_random_bot_against_rule_bots():
    # docs/mahjong_bots.md: the random bot ranks 3.88 against three rule bots.
    games = 4
    ours = dup.run_duplicate(PolicyTable(random_policy(0)), "policy", "rule", games, seed=0)
    bots = dup.run_duplicate(tables.BotTable(), "random", "rule", games, seed=0)
    ch, ref = ours.summary()["challenger"], bots.summary()["challenger"]
    assert 3.6 <= ch["avg_rank"] <= 4.0 and abs(ch["avg_rank"] - ref["avg_rank"]) < 0.25
    assert ch["win_rate"] < 0.02 and ch["games"] == 4 * games


def test_explicit_simulator_rules():
    rules = mj.Game()
    with pytest.raises(ValueError, match=r"games: one per table \(2\), got 1"):
        mj.BatchSim(2, rules, games=[(0, 0, 0)])
    sim = mj.BatchSim(2, rules, bots=["rule"] * 4, games=[(0, 0, 1), (0, 1, 1)])
    n = sim.num_slots
    out = dict(obs=np.empty((n, 84, 34), np.float32), mask=np.empty((n, 155), np.uint8),
               active=np.empty(n, np.uint8), done=np.empty(n, np.uint8))  # fmt: skip
    sim.reset(None, **out)
    while out["active"].any():
        sim.step(np.argmax(out["mask"], -1).astype(np.int64), **out)  # finished tables skipped
    assert sim.finished(0) and sim.finished(1) and sim.games_finished == 2
    with pytest.raises(ValueError, match="table 0 has played its explicit game"):
        sim.reset(None, **out)
    stats, game = sim.table_stats(1), sim.game(1)
    assert game.is_done() and stats["scores"] == list(game.scores)
    assert sorted(stats["ranks"]) == [1, 2, 3, 4] and stats["hands"] == game.hands_played


def test_bad_policy_outputs_are_refused():
    job = [tables.GameJob(0, 0, ("policy", "rule", "rule", "rule"), 1)]
    with pytest.raises(ValueError, match=r"policy 'policy' must return an int64 tensor of shape \(1,\)"):
        PolicyTable(lambda o, m: torch.zeros(2, dtype=torch.int64)).play(job)
    with pytest.raises(ValueError, match="a policy chose an illegal action: .*not legal"):
        PolicyTable(lambda o, m: torch.full((len(o),), 154)).play(job)
    with pytest.raises(ValueError, match="unknown player 'mortal'; accepted: policy, random"):
        PolicyTable(first_legal).play([tables.GameJob(0, 0, ("mortal", "rule", "rule", "rule"), 1)])


# -- checkpoints ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A real PPO run: python train.py env=mahjong debug=tiny (MLP policy, ~20 s)."""
    cwd = tmp_path_factory.mktemp("train")
    done = subprocess.run(
        [sys.executable, TRAIN, "env=mahjong", "debug=tiny", "tracking=none", "seed=3"],
        cwd=cwd, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = (cwd / "outputs" / "runs").iterdir()
    return run


def test_a_debug_tiny_checkpoint_evaluates_end_to_end(run_dir, tmp_path, capsys):
    out = tmp_path / "d.json"
    argv = ["--challenger", "policy", "--checkpoint", str(run_dir), "--opponent", "rule",
            "--games", "2", "--seed", "1", "--out", str(out)]  # fmt: skip
    assert dup.main(argv) == 0
    s = json.loads(out.read_text())
    assert s["challenger_bot"] == "policy" and s["opponent_bot"] == "rule"
    latest = (run_dir / "phase0" / "checkpoints" / "latest.pt").resolve()
    assert s["checkpoint"] == str(latest) and s["checkpoint_global_step"] > 0
    assert s["challenger"]["games"] == 8 and s["opponents"]["games"] == 24
    assert 1 <= s["challenger"]["avg_rank"] <= 4
    assert "challenger policy: avg rank" in capsys.readouterr().out
    # The same numbers from the Python API on the checkpoint file itself.
    table = PolicyTable(policy_from_checkpoint(latest))
    api = dup.run_duplicate(table, "policy", "rule", 2, seed=1).summary()
    assert api["challenger"] == s["challenger"] and api["opponents"] == s["opponents"]


def test_loaded_actor_has_the_checkpoint_weights_and_acts_greedily(run_dir):
    actor, info = load_policy_actor(run_dir)
    state = torch.load(info["file"], weights_only=True)["model_state_dict"]
    for k, v in actor.state_dict().items():
        assert torch.equal(v, state[f"actor.{k}"]), k
    # Greedy = TorchRL's deterministic action of the masked distribution, and always legal.
    env = MahjongEnv(8)
    td = env.reset()
    for _ in range(20):
        greedy = greedy_policy(actor)(td["observation"], td["action_mask"])
        with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
            mode = actor(td.clone())["action"]
        assert torch.equal(greedy, mode)
        assert td["action_mask"].gather(1, greedy[:, None]).all()
        td = env.step(td.set("action", greedy))["next"]


def test_a_shared_trunk_model_and_compiled_keys_load(tmp_path):
    # model=planes_resnet (one trunk under both heads), keys as a hardware.compile run saves
    # them: compile_networks wraps the trunk's network, whose keys gain "_orig_mod.".
    env = MahjongEnv(1)
    actor, _ = build_planes_actor_critic(env.observation_spec, env.action_spec, channels=8,
                                         blocks=1, hidden=16, shared=True)  # fmt: skip
    reference = greedy_policy(actor)
    state = {"actor." + k.replace("module.0.module.", "module.0.module._orig_mod.", 1): v
             for k, v in actor.state_dict().items()}  # fmt: skip
    assert sum("._orig_mod." in k for k in state) > 2
    model = {"_target_": "meeple.nets.planes.build_planes_actor_critic", "_partial_": True,
             "channels": 8, "blocks": 1, "hidden": 16, "shared": True}  # fmt: skip
    config = {"model": model, "env": {"backend": "mahjong", "learner_seats": [0]}}
    path = tmp_path / "m.pt"
    save_atomic({"model_state_dict": state, "config": config, "checkpoint_version": 1}, path)
    loaded, _ = load_policy_actor(path)
    td = env.reset()
    assert torch.equal(greedy_policy(loaded)(td["observation"], td["action_mask"]),
                       reference(td["observation"], td["action_mask"]))  # fmt: skip
    # The same weights under a config that builds another network: refused, keys named.
    config["model"]["hidden"] = 32
    save_atomic({"model_state_dict": state, "config": config, "checkpoint_version": 1}, path)
    with pytest.raises(
        CheckpointError, match="weights do not fit model 'meeple.nets.planes.*size mismatch"
    ):
        load_policy_actor(path)


@pytest.mark.parametrize("env_cfg", [{"learner_seats": [0]}, {"learner_seats": [0, 2], "oracle": True},
                                     {"league": True, "oracle": True}])  # fmt: skip
def test_a_checkpoint_is_rebuilt_from_the_env_specs_without_an_env(env_cfg, monkeypatch):
    env_cfg = {"backend": "mahjong", **env_cfg}
    env = backend.make_env(env_cfg, num_envs=backend.batch_unit(env_cfg))

    def no_env(*args, **kwargs):
        raise AssertionError("loading a policy built an env")

    monkeypatch.setattr(MahjongEnv, "_build", no_env)
    observation_spec, action_spec = policy._mahjong_specs({"env": env_cfg})
    assert observation_spec == env.observation_spec and action_spec == env.action_spec


def test_bad_checkpoints_are_clear_errors(run_dir, tmp_path, capsys):
    with pytest.raises(CheckpointError, match="no such file; give a checkpoint file"):
        policy_from_checkpoint(tmp_path / "missing.pt")
    with pytest.raises(CheckpointError, match="a directory without phase0/checkpoints/latest.pt"):
        policy_from_checkpoint(tmp_path)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot be deserialized safely"):
        policy_from_checkpoint(garbage)
    # A checkpoint whose bytes changed after it was written: its sidecar refuses it.
    good = (run_dir / "phase0" / "checkpoints" / "latest.pt").resolve()
    bad = tmp_path / good.name
    data = bytearray(good.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    (tmp_path / f"{good.name}.sha256").write_text((good.parent / f"{good.name}.sha256").read_text())
    with pytest.raises(ChecksumMismatch, match="the file is corrupt"):
        policy_from_checkpoint(bad)
    other = tmp_path / "gym.pt"
    save_atomic({"model_state_dict": {"actor.w": torch.zeros(1)}, "checkpoint_version": 1,
                 "config": {"model": {}, "env": {"backend": "gym"}}}, other)  # fmt: skip
    with pytest.raises(CheckpointError, match="env backend 'gym'; only env=mahjong policies"):
        policy_from_checkpoint(other)
    # The CLI: one clear line, exit code 2, no traceback.
    assert dup.main(["--challenger", "policy", "--checkpoint", str(garbage)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("meeple: error:") and "cannot be deserialized" in err
    with pytest.raises(SystemExit):
        dup.main(["--challenger", "policy"])
    assert "needs --checkpoint" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        dup.main(["--challenger", "rule", "--checkpoint", str(good)])
    assert "--checkpoint is used only with --challenger policy" in capsys.readouterr().err


def test_a_checkpoint_against_copies_of_itself_with_a_paired_bot_baseline(run_dir, tmp_path, capsys):
    latest = (run_dir / "phase0" / "checkpoints" / "latest.pt").resolve()
    out = tmp_path / "vs.json"
    argv = ["--challenger", str(latest), "--opponent", str(run_dir), "--baseline", "rule", "--games", "3",
            "--east-only", "--out", str(out)]
    assert dup.main(argv) == 0
    s = json.loads(out.read_text())
    assert s["challenger_bot"] == str(latest)
    # One network in all four seats (the run directory resolves to the same file): exactly even.
    assert s["challenger"]["avg_rank"] == 2.5 and s["challenger"]["vs_even"] is None
    assert s["checkpoint"] == str(latest) and s["opponent_policy"]["checkpoint"] == str(latest)
    digest = hashlib.sha256(latest.read_bytes()).hexdigest()  # the network named by content too
    assert s["checkpoint_sha256"] == s["opponent_policy"]["checkpoint_sha256"] == digest
    # The rule bot played the same walls against the same three networks, index by index.
    assert s["paired"]["n"] == 3
    assert s["paired"]["mean_diff"] == pytest.approx(2.5 - s["baseline"]["avg_rank"])
    # both sides' per-index samples are kept: the paired difference is theirs
    ch, base = s["challenger"]["per_index_rank"], s["baseline"]["per_index_rank"]
    assert sorted(ch) == sorted(base) == ["0", "1", "2"] and set(ch.values()) == {2.5}
    assert sum(ch[g] - base[g] for g in ch) / 3 == pytest.approx(s["paired"]["mean_diff"])
    assert "paired over 3 game indices" in capsys.readouterr().out


def _stats(ranks_by_index):
    stats = dup.DuplicateStats()
    other = tables.SeatResult(score=25000, rank=0, hands=4, wins=0, tsumo=0, deal_ins=0, riichi=0, calls=0)
    for g, ranks in ranks_by_index.items():
        for seat, rank in enumerate(ranks):
            results = [other] * 4
            results[seat] = tables.SeatResult(25000, rank, 4, 0, 0, 0, 0, 0)
            stats.add(g, seat, results)
    return stats


def test_paired_comparison_and_the_test_against_even():
    from scipy import stats as sp

    a = _stats({0: [1, 2, 1, 1], 1: [2, 2, 3, 1], 2: [1, 1, 2, 1], 3: [4, 2, 2, 2]})
    b = _stats({0: [3, 3, 2, 4], 1: [2, 4, 3, 3], 2: [1, 3, 4, 2], 3: [4, 4, 3, 1], 9: [1, 1, 1, 1]})
    means_a, means_b = [1.25, 2.0, 1.25, 2.5], [3.0, 3.0, 2.5, 3.0]
    paired = dup.paired_comparison(a, b)
    assert paired["n"] == 4  # index 9 was played by b only
    assert paired["mean_diff"] == pytest.approx(sum(means_a) / 4 - sum(means_b) / 4)
    assert paired["p"] == pytest.approx(sp.ttest_rel(means_a, means_b).pvalue)
    assert paired["diff_ci95"][0] < paired["mean_diff"] < paired["diff_ci95"][1] < 0
    even = a.summary()["challenger"]["vs_even"]
    assert even["n"] == 4 and even["p"] == pytest.approx(sp.ttest_1samp(means_a, 2.5).pvalue) and even["t"] < 0
    with pytest.raises(ValueError, match="needs >= 2 shared game indices, got 1"):
        dup.paired_comparison(a, _stats({0: [1, 1, 1, 1]}))


def test_a_safe_challenger_is_its_own_player_and_deals_in_less(run_dir, tmp_path):
    """--safe-challenger: the same network, its dealing discards masked by the oracle planes."""
    out = tmp_path / "safe.json"
    argv = ["--challenger", str(run_dir), "--baseline", str(run_dir), "--safe-challenger",
            "--opponent", "rule", "--games", "3", "--out", str(out)]  # fmt: skip
    assert dup.main(argv) == 0
    s = json.loads(out.read_text())
    assert s["safe"] is True and "safe" not in s["baseline_policy"]
    # the plain network (the baseline, on the same walls) deals in; the safe one less
    assert s["challenger"]["deal_in_rate"] < s["baseline"]["deal_in_rate"], (s["challenger"], s["baseline"])
    with pytest.raises(SystemExit):
        dup.main(["--challenger", "rule", "--safe-challenger"])


def test_a_sampled_challenger_is_its_own_player_and_a_cold_one_plays_the_argmax(run_dir, tmp_path, capsys):
    """--sample T: the challenger draws from softmax(logits / T) while the same network's copies
    in the other seats stay greedy; near T = 0 the draw is the argmax, so the table is even."""
    def play(t):
        out = tmp_path / f"sample{t}.json"
        argv = ["--challenger", str(run_dir), "--opponent", str(run_dir), "--sample", str(t),
                "--games", "3", "--east-only", "--out", str(out)]  # fmt: skip
        assert dup.main(argv) == 0
        return json.loads(out.read_text())

    warm, cold = play(1.0), play(1e-6)
    assert warm["sample_temperature"] == 1.0 and "sample_temperature" not in warm["opponent_policy"]
    assert set(warm["challenger"]["per_index_rank"].values()) != {2.5}  # a player of its own
    assert cold["challenger"]["avg_rank"] == 2.5 and set(cold["challenger"]["per_index_rank"].values()) == {2.5}
    for bad in (["--challenger", str(run_dir), "--sample", "0"], ["--challenger", "rule", "--sample", "1"]):
        with pytest.raises(SystemExit):
            dup.main(bad)
        assert "--sample" in capsys.readouterr().err


def test_readiness_checks_the_design_gate_on_the_challenger(run_dir, tmp_path, capsys):
    """--readiness checks from_student_ready.yaml's conditions on the challenger: a network
    against copies of itself places exactly 2.5 with no t-test, so it fails (exit 1); the JSON and
    the printed lines say which conditions hold. A bot opponent is refused."""
    from meeple_mahjong.readiness import readiness_gates

    out = tmp_path / "ready.json"
    argv = ["--challenger", str(run_dir), "--opponent", str(run_dir), "--games", "2", "--east-only",
            "--readiness", "--out", str(out)]
    assert dup.main(argv) == 1
    s = json.loads(out.read_text())
    ch, verdict = s["challenger"], s["readiness"]
    assert verdict["passed"] is False
    assert [c["metric"] for c in verdict["checks"]] == [g.metric for g in readiness_gates()]
    by_name = {c["metric"].removeprefix("eval/vs_start_"): c for c in verdict["checks"]}
    assert by_name["avg_rank"]["value"] == 2.5 and by_name["avg_rank"]["passed"] is False
    assert math.isnan(by_name["p_value"]["value"]) and by_name["p_value"]["passed"] is False
    assert by_name["win_rate"]["value"] == ch["win_rate"]
    assert by_name["win_rate"]["passed"] is (ch["win_rate"] >= 0.21)
    if ch["deal_in_rate"]:
        assert ch["win_per_deal_in"] == pytest.approx(ch["win_rate"] / ch["deal_in_rate"])
    printed = capsys.readouterr().out
    assert "readiness gate (from_student_ready.yaml): FAILED" in printed
    assert "  avg_rank         2.5 <= 2.45: FAIL" in printed
    with pytest.raises(SystemExit) as stop:
        dup.main(["--challenger", str(run_dir), "--opponent", "rule", "--readiness"])
    assert stop.value.code == 2
    assert "--opponent must be phase 1's gate" in capsys.readouterr().err


def test_wins_per_deal_in():
    assert dup.win_per_deal_in(3, 2) == 1.5
    assert dup.win_per_deal_in(0.2, 0.1) == pytest.approx(2.0)
    assert dup.win_per_deal_in(1, 0) == math.inf
    assert math.isnan(dup.win_per_deal_in(0, 0))
