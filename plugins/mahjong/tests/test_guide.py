"""The rule bot as a guide (``env.guide``, meeple_mahjong.guide_ppo): the env writes the bot's
choice in each learner seat, the module's cross-entropy teaches a network those choices (and does
not through a cut gradient), the recipe trains from the clone, and bad options fail in one line."""

import pytest
import torch

from meeple.checkpoint.callback import load_gate
from meeple.checkpoint.io import load_verified
from meeple.errors import ConfigError
from meeple_mahjong.batch_env import MahjongEnv
from meeple_mahjong.env import backend
from meeple_mahjong.guide_ppo import GuidePPOModule, guide_loss
from meeple_mahjong.specs import ACTION_KINDS
from meeple_native import mahjong as mj


def _play_guided(env: MahjongEnv, steps: int, check) -> None:
    """Steps ``env`` with the learner seats playing the guide's choice (the only legal action
    where there is no choice), calling ``check(td)`` at each step."""
    td = env.reset()
    for _ in range(steps):
        check(td)
        guide, mask = td["guide_action"], td["action_mask"]
        td["action"] = torch.where(guide >= 0, guide, mask.float().argmax(-1))
        _, td = env.step_and_maybe_reset(td)


def test_the_env_writes_the_rule_bots_choice_in_each_learner_seat():
    env = MahjongEnv(8, learner_seats=[1, 3], guide="rule")  # 4 tables, two learner seats each
    env.set_seed(5)
    seen = {"choices": 0, "wins": 0}

    def check(td):
        mask, active = td["action_mask"], td["active"].squeeze(-1)
        choice = active & (mask.sum(-1) >= 2)
        assert (td["guide_action"][~choice] == -1).all()
        for r in choice.nonzero().squeeze(-1).tolist():
            seat = int(td["seat"][r])
            assert seat in (1, 3) and seat == (1, 3)[r % 2]
            expected = mj.action_index(mj.bot_action(env.sim.game(r // 2), seat, "rule", 0), True)
            assert int(td["guide_action"][r]) == expected and mask[r, expected]
            if mask[r, ACTION_KINDS["win"].start:ACTION_KINDS["win"].stop].any():  # the bot wins when it can
                assert int(td["guide_action"][r]) in ACTION_KINDS["win"]
                seen["wins"] += 1
            seen["choices"] += 1

    _play_guided(env, 150, check)
    assert seen["choices"] > 200 and seen["wins"] >= 1, seen


def test_the_guide_is_legal_in_every_seat_and_bad_options_fail_in_one_line():
    # every seat a learner that plays the guide: an illegal guide would stop the simulator
    env = MahjongEnv(32, learner_seats=[0, 1, 2, 3], guide="rule")
    env.set_seed(3)
    assert "guide_action" in env.observation_spec.keys()
    _play_guided(env, 40, lambda td: None)
    with pytest.raises(ConfigError, match=r"env.guide='nobot'; accepted: null or a built-in bot"):
        MahjongEnv(4, guide="nobot")
    with pytest.raises(ConfigError, match="env.guide with env.league=true"):
        backend.make_env({"league": True, "guide": "rule", "learner_seats": [0]}, num_envs=4)
    with pytest.raises(ConfigError, match="needs the env's guide"):
        GuidePPOModule.prepare_env(None, MahjongEnv(4))  # type: ignore[arg-type]


def test_the_guide_loss_leaves_out_rows_without_a_choice():
    log_probs = torch.log_softmax(torch.tensor([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0]]), -1)
    ce, agree = guide_loss(log_probs, torch.tensor([0, 2, -1]))
    assert ce == pytest.approx(-(log_probs[0, 0] + log_probs[1, 2]) / 2)
    assert agree == pytest.approx(0.5)
    ce, agree = guide_loss(log_probs, torch.tensor([-1, -1, -1]))
    assert ce == 0 and torch.isnan(agree)


@pytest.mark.parametrize("broken", [False, True])
def test_the_guide_term_teaches_a_network_the_bots_choices(broken):
    """The learning check of the guide: the cross-entropy on the choices the env wrote, through the
    real network, raises its agreement with the bot; the same update with the logits cut from the
    network (a gradient that cannot reach the weights) does not move it."""
    from meeple_mahjong.net import build_mahjong_actor_critic

    torch.manual_seed(0)
    env = MahjongEnv(16, guide="rule")
    env.set_seed(9)
    actor, _ = build_mahjong_actor_critic(env.observation_spec, env.action_spec, blocks=1, channels=16,
                                          groups=4, hidden=32, tile_head=True)  # fmt: skip
    rows = []
    _play_guided(env, 40, lambda td: rows.append(td.select("observation", "action_mask", "guide_action").clone()))
    batch = torch.cat(rows)
    batch = batch[batch["guide_action"] >= 0]
    assert len(batch) > 300
    opt = torch.optim.Adam(actor.parameters(), lr=3e-3)

    def agreement():
        with torch.no_grad():
            return float(guide_loss(actor.get_dist(batch.clone(False)).logits, batch["guide_action"])[1])

    start = agreement()
    for _ in range(60):
        logits = actor.get_dist(batch.clone(False)).logits
        if broken:
            logits = logits.detach().requires_grad_(True)
        loss, _ = guide_loss(logits, batch["guide_action"])
        opt.zero_grad()
        loss.backward()
        opt.step()
    end = agreement()
    if broken:
        assert end == pytest.approx(start, abs=1e-6)
    else:
        assert end > start + 0.3, (start, end)


def test_phase1_guide_trains_from_the_clone_towards_the_rule_bot(mahjong_runs, tiny_train, tmp_path):
    source = mahjong_runs["phase2"]  # its gates/phase1.pt is the clone
    tiny_train(tmp_path, "+experiment=phase1_guide", f"pipeline.source={source}")
    (run,) = (tmp_path / "outputs" / "runs").iterdir()
    gate = load_gate(run / "gates" / "guide.pt")
    clone = load_gate(source / "gates" / "phase1.pt")["model_state_dict"]
    state = gate["model_state_dict"]
    (stem,) = [k for k in state if k.startswith("actor.") and k.endswith("stem.0.weight")]
    assert not (state[stem] == clone[stem]).all()  # the guide's term moved the cloned body
    metrics = gate["metrics"]
    assert metrics["loss/guide"] > 0 and 0 <= metrics["guide/agree"] <= 1 and "eval/avg_rank" in metrics
    latest = load_verified(run / "phase1" / "checkpoints" / "latest.pt")
    assert latest["config"]["env"]["guide"] == "rule"
    assert latest["config"]["phase"]["module"]["guide_coef"] == 1.0
