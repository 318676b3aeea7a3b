"""Oracle policies in the duplicate (phase 2's teacher reads the hidden-information planes) and
the duplicate callback against network opponents: a frozen start copy or a checkpoint."""

import json
from functools import partial

import numpy as np
import pytest
import torch
from scipy import stats as sp
from torchrl.envs.utils import ExplorationType, set_exploration_type

import meeple_mahjong as mj
from meeple.checkpoint.io import save_atomic
from meeple.phases.ppo.module import PPOModule
from meeple_mahjong import duplicate as dup
from meeple_mahjong import tables
from meeple_mahjong.batch_env import MahjongEnv
from meeple_mahjong.evaluation import DuplicateEvaluation, even_metrics
from meeple_mahjong.net import build_mahjong_actor_critic
from meeple_mahjong.policy import PolicyTable, greedy_policy, is_oracle, policy_from_checkpoint
from meeple_native import mahjong as _mj

TINY = dict(blocks=1, channels=8, groups=4, neck=4, hidden=16)


def last_legal(obs, mask):
    return (mask.shape[-1] - 1) - mask.flip(-1).to(torch.int8).argmax(-1)


def build(oracle: bool, seed: int = 0):
    """A tiny SE-ResNet actor and critic for the env's specs (the teacher's when ``oracle``)."""
    env = MahjongEnv(1, oracle=oracle)
    torch.manual_seed(seed)
    actor, critic = build_mahjong_actor_critic(env.observation_spec, env.action_spec, **TINY,
                                               oracle_planes=mj.ORACLE_PLANES if oracle else 0)  # fmt: skip
    env.close()
    return actor, critic


def test_an_oracle_fn_gets_the_oracle_planes_of_the_deciding_seat():
    seen = []

    def teacher(obs, mask, oracle):
        seen.append((obs.clone(), oracle.clone()))
        return last_legal(obs, mask)

    teacher.oracle = True
    job = tables.GameJob(7, 3, ("rule", "policy", "rule-nofold", "rule"), 41)
    table = PolicyTable(teacher, east_only=True)
    (result,) = table.play([job])
    # The same game in a plain loop (bots on their seat streams, docs/mahjong_bots.md): the
    # planes encode_public / encode_oracle give the policy's seat at each of its decisions.
    g = mj.Game(east_only=True)
    g.reset(job.session_seed, job.game_index)
    streams = [_mj.BotStream(_mj.seat_stream_seed(job.policy_seed, s)) for s in range(4)]
    expected = []
    while not g.is_done():
        seat = g.pending()[0]
        if seat == 1:
            expected.append((mj.encode_public(g, seat), mj.encode_oracle(g, seat)))
            legal = np.flatnonzero(mj.legal_mask(g, seat))
            action = mj.action_from_index(g, seat, int(legal[-1]))
        else:
            action = streams[seat].act(g, seat, job.players[seat])
        g.step(seat, action)
    assert [r.rank for r in result] == [sorted(range(4), key=lambda s: (-g.scores[s], s)).index(s) + 1
                                        for s in range(4)]  # fmt: skip
    assert len(seen) == len(expected) == table.decisions["policy"] > 10
    for i, ((obs, oracle), (ref_obs, ref_oracle)) in enumerate(zip(seen, expected, strict=True)):
        assert obs.shape == (1, 84, 34) and oracle.shape == (1, mj.ORACLE_PLANES, 34)
        assert torch.equal(obs[0], torch.as_tensor(ref_obs)), i
        assert torch.equal(oracle[0], torch.as_tensor(ref_oracle)), i
    # The hidden tiles are in the planes: they differ from anything the public planes show.
    assert any(o.abs().sum() > 0 for _, o in seen)


def test_an_oracle_actor_plays_a_duplicate_against_a_public_network():
    teacher, _ = build(oracle=True)
    student, _ = build(oracle=False, seed=1)
    fn, student_fn = greedy_policy(teacher), greedy_policy(student)
    assert is_oracle(fn) and not is_oracle(student_fn)
    # Greedy = the teacher's deterministic action on the env's own oracle observation.
    env = MahjongEnv(4, oracle=True)
    td = env.reset()
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        mode = teacher(td.clone())["action"]
    assert torch.equal(fn(td["observation"], td["action_mask"], td["oracle"]), mode)
    env.close()
    table = PolicyTable({"teacher": fn, "student": student_fn}, east_only=True)
    s = dup.run_duplicate(table, "teacher", "student", games=1, seed=4).summary()
    assert s["challenger"]["games"] == 4 and 1 <= s["challenger"]["avg_rank"] <= 4
    assert table.decisions["teacher"] > 0 and table.decisions["student"] > table.decisions["teacher"]


def test_even_metrics_and_their_zero_variance_cases():
    xs = [1.5, 2.25, 3.0, 2.0]
    m = even_metrics(xs)
    assert m["effect"] == pytest.approx(2.5 - sum(xs) / 4)
    assert m["p_value"] == pytest.approx(sp.ttest_1samp(xs, 2.5).pvalue)
    assert even_metrics([2.5, 2.5, 2.5]) == {"effect": 0.0, "p_value": 1.0}  # a copy of itself
    assert even_metrics([2.0, 2.0]) == {"effect": 0.5, "p_value": 0.0}  # better at every index
    assert np.isnan(even_metrics([2.0])["p_value"])  # one index: no test


class _Trainer:
    def __init__(self, **kw):
        self.loggers, self.global_step, self.current_epoch, self.should_stop = [], 0, 0, False
        self.max_epochs = None
        self.__dict__.update(kw)


def ppo_module(oracle: bool, seed: int = 0) -> PPOModule:
    actor, critic = build(oracle, seed)
    module = PPOModule(actor, critic, optimizer=partial(torch.optim.Adam, lr=1e-3), anneal_lr=False,
                       max_grad_norm=None, gamma=0.99, gae_lambda=0.95, clip_epsilon=0.2, entropy_coef=0.0,
                       critic_coef=0.5, normalize_advantage=True)  # fmt: skip
    module.logged = {}
    module.log = lambda key, value, **_: module.logged.__setitem__(key, value)
    return module


def test_a_ppo_teacher_against_its_start_copy():
    module = ppo_module(oracle=True)
    cb = DuplicateEvaluation(games=2, opponent="start", prefix="eval/vs_start_", every_n_epochs=3, seed=2,
                             rules={"east_only": True})  # fmt: skip
    with pytest.raises(RuntimeError, match="start copy is taken at on_train_start"):
        cb.evaluate(module)
    trainer = _Trainer(max_epochs=2)
    cb.on_train_start(trainer, module)
    assert cb.untrained is None and cb.history == []  # no baseline against start (2.5 by construction)
    start = {k: v.clone() for k, v in module.policy.state_dict().items()}
    cb.on_train_epoch_end(trainer, module)  # rollout 1 of 2: not due (every 3)
    assert module.logged == {}
    trainer.current_epoch = 1
    cb.on_train_epoch_end(trainer, module)  # the last rollout: always evaluated; weights unchanged
    logged = module.logged
    assert logged["eval/vs_start_avg_rank"] == 2.5 and logged["eval/vs_start_p_value"] == 1.0
    assert logged["eval/vs_start_effect"] == 0.0 and logged["eval/vs_start_games"] == 2
    assert not any(k.startswith("eval/avg") or "untrained" in k for k in logged)
    # Training moves the policy, never the frozen copy.
    with torch.no_grad():
        for p in module.policy.parameters():
            p.add_(torch.randn_like(p))
    for k, v in cb.opponent_actor.state_dict().items():
        assert torch.equal(v, start[k]), k
    assert not any(p.requires_grad for p in cb.opponent_actor.parameters())
    assert module.policy.training  # evaluation leaves the mode as it found it
    # A resume plays the saved start copy, not the resumed weights.
    restored = DuplicateEvaluation(games=2, opponent="start", prefix="eval/vs_start_")
    restored.load_state_dict(cb.state_dict())
    restored.on_train_start(_Trainer(global_step=10), ppo_module(oracle=True, seed=5))
    for k, v in restored.opponent_actor.state_dict().items():
        assert torch.equal(v, start[k]), k
    assert len(restored.history) == 1 and restored.state_key != DuplicateEvaluation(games=1).state_key


def save_checkpoint(path, actor, oracle: bool):
    model = {"_target_": "meeple_mahjong.net.build_mahjong_actor_critic", "_partial_": True, **TINY,
             "oracle_planes": mj.ORACLE_PLANES if oracle else 0}  # fmt: skip
    env = {"backend": "mahjong", "learner_seats": [0], "oracle": oracle, "rules": {"east_only": True}}
    state = {"actor." + k: v for k, v in actor.state_dict().items()}
    save_atomic({"model_state_dict": state, "config": {"model": model, "env": env}, "checkpoint_version": 1,
                 "global_step": 7}, path)  # fmt: skip
    return path


def test_an_oracle_checkpoint_round_trip_the_cli_and_a_checkpoint_opponent(tmp_path, capsys):
    teacher, _ = build(oracle=True)
    student, _ = build(oracle=False, seed=1)
    t_path = save_checkpoint(tmp_path / "teacher.pt", teacher, oracle=True)
    s_path = save_checkpoint(tmp_path / "student.pt", student, oracle=False)
    loaded = policy_from_checkpoint(t_path)
    assert is_oracle(loaded)
    env = MahjongEnv(4, oracle=True)
    td = env.reset()
    args = (td["observation"], td["action_mask"], td["oracle"])
    assert torch.equal(loaded(*args), greedy_policy(teacher)(*args))
    env.close()
    out = tmp_path / "d.json"
    argv = ["--challenger", str(t_path), "--opponent", str(s_path), "--games", "1", "--east-only",
            "--out", str(out)]  # fmt: skip
    assert dup.main(argv) == 0
    s = json.loads(out.read_text())
    assert s["checkpoint"] == str(t_path.resolve()) and s["opponent_policy"]["checkpoint"] == str(s_path.resolve())
    assert s["challenger"]["games"] == 4 and "challenger" in capsys.readouterr().out
    # The callback against the student's checkpoint plays the same games as the CLI.
    module = ppo_module(oracle=True)
    module.actor.load_state_dict(teacher.state_dict())
    cb = DuplicateEvaluation(games=1, opponent_checkpoint=t_path.parent / "student.pt", seed=0,
                             rules={"east_only": True})  # fmt: skip
    cb.on_train_start(_Trainer(max_epochs=1), module)
    assert cb.untrained is None  # no baseline against a network unless baseline=true
    cb.on_train_epoch_end(_Trainer(max_epochs=1), module)
    assert module.logged["eval/avg_rank"] == s["challenger"]["avg_rank"]
    assert module.logged["eval/effect"] == pytest.approx(2.5 - s["challenger"]["avg_rank"])
    assert np.isnan(module.logged["eval/p_value"])  # one game index: no test


@pytest.mark.parametrize("kwargs, message", [
    ({"opponent": "rule", "opponent_checkpoint": "x.pt"}, r"opponent='rule' and opponent_checkpoint='x.pt'; "
                                                          "accepted: one of them"),
    ({"opponent": "mortal"}, r"unknown duplicate evaluation opponent 'mortal'; accepted: .*start"),
    ({"prefix": ""}, r"prefix=''; accepted: a non-empty metric key prefix"),
])
def test_bad_opponent_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DuplicateEvaluation(games=1, **kwargs)
