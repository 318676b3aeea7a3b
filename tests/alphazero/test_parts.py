"""AlphaZero pieces: loss, samples and their mirror, the torch evaluator (the Connect Four arena and
benchmarks are tested in plugins/connect4/tests)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tensordict import TensorDict

import meeple_native as mn
from meeple.nets.az_resnet import AZResNet
from meeple.phases.alphazero.evaluator import TorchEvaluator
from meeple.phases.alphazero.module import AlphaZeroModule, alphazero_loss


def _batch(legal, policy, value):
    legal = torch.tensor(legal)
    return TensorDict({"legal": legal, "policy": torch.tensor(policy, dtype=torch.float32),
                       "value": torch.tensor(value, dtype=torch.float32)}, batch_size=[legal.shape[0]])


def test_loss_is_cross_entropy_over_legal_moves_plus_mse_plus_l2():
    legal = [[True, True, False, True, True, False, False]]
    batch = _batch(legal, [[1, 0, 0, 0, 0, 0, 0]], [1.0])
    logits = torch.zeros(1, 7)
    logits[0, 2] = 50.0  # an illegal move's logit must not matter
    value = torch.tensor([0.5])
    w = [torch.full((2, 2), 0.5)]
    out = alphazero_loss(logits, value, batch, w, weight_decay=0.1, value_coef=2.0)
    assert out["loss/policy"].item() == pytest.approx(math.log(4))  # uniform over the 4 legal moves
    assert out["loss/value"].item() == pytest.approx(0.25)
    assert out["loss/l2"].item() == pytest.approx(0.1 * 4 * 0.25)
    assert out["loss/total"].item() == pytest.approx(math.log(4) + 2 * 0.25 + 0.1)
    # one-hot target: KL = cross-entropy (target entropy 0)
    assert out["loss/policy_kl"].item() == pytest.approx(math.log(4))


def test_a_training_step_moves_the_candidate_not_the_best(tmp_path):
    torch.manual_seed(0)
    module = AlphaZeroModule(AZResNet((3, 6, 7), 7, channels=8, blocks=1), optimizer=lambda p: torch.optim.SGD(p, lr=0.1))
    before = {k: v.clone() for k, v in module.best.state_dict().items()}
    planes = torch.zeros(4, 3, 6, 7)
    planes[:, 2] = 1
    batch = _batch([[True] * 7] * 4, [[0, 0, 0, 1, 0, 0, 0]] * 4, [1.0] * 4)
    batch["planes"] = planes
    opt = module.configure_optimizers()
    logits, value = module.net(planes)
    loss = alphazero_loss(logits, value, batch, module._decayed, 1e-4, 1.0)["loss/total"]
    loss.backward()
    opt.step()
    assert any(not torch.equal(before[k], v) for k, v in module.net.state_dict().items() if "weight" in k)
    assert all(torch.equal(before[k], v) for k, v in module.best.state_dict().items())
    assert not any(p.requires_grad for p in module.best.parameters())
    module.promote()
    assert module.generation == 1
    assert all(torch.equal(module.net.state_dict()[k], v) for k, v in module.best.state_dict().items())


def test_mirrored_samples_equal_the_mirrored_game():
    from meeple.phases.alphazero.data import samples_to_tensordict

    with mn.SelfPlay(None, num_simulations=16, games_per_worker=2, seed=3) as sp:
        out = sp.run(2)
    td = samples_to_tensordict(out, mirror=True)
    n = len(out["value"])
    assert td.batch_size[0] == 2 * n
    np.testing.assert_allclose(td["policy"].sum(-1).numpy(), 1.0, rtol=1e-5)
    assert set(np.unique(td["value"].numpy())) <= {-1.0, 0.0, 1.0}
    # Replay game 0 in mirror image: its planes and legal masks are the flipped samples.
    moves = out["moves"][0]
    position = mn.Connect4()
    planes = np.empty(mn.OBS_SHAPE, np.float32)
    for ply, column in enumerate(moves):
        position.encode(planes)
        mirrored = mn.Connect4.from_moves("".join(str(8 - int(c)) for c in moves[:ply]))
        mirror_planes = np.empty(mn.OBS_SHAPE, np.float32)
        mirrored.encode(mirror_planes)
        np.testing.assert_array_equal(td["planes"][n + ply].numpy(), mirror_planes)
        np.testing.assert_array_equal(td["planes"][ply].numpy(), planes)
        legal = np.zeros(7, bool)
        legal[mirrored.legal_moves()] = True
        np.testing.assert_array_equal(td["legal"][n + ply].numpy(), legal)
        position.play(int(column) - 1)






def test_torch_evaluator_drives_native_search():
    net = AZResNet((3, 6, 7), 7, channels=8, blocks=1)
    net.train()
    evaluator = TorchEvaluator(net)
    search = mn.MCTS(num_simulations=32, leaves_in_flight=4)
    result = search.search(mn.Connect4.from_moves("4453"), evaluator)
    assert sum(result["visits"]) == 32 and evaluator.calls > 0
    assert net.training  # restored after evaluating in eval mode
    a, b = evaluator.planes_buffers(16, mn.OBS_SHAPE)
    assert a.shape == (16, 3, 6, 7) and a.data_ptr() != b.data_ptr()


def test_runs_of_game_id_ranges_merge_into_the_whole_run():
    """What collector=ray does with its actors' outputs (meeple.phases.alphazero.ray_selfplay),
    without Ray: engines playing ids 0-2 and 3-4 merge into one engine's run of ids 0-4."""
    from meeple.phases.alphazero.ray_selfplay import merge_runs
    from meeple_native import SelfPlay

    options = dict(num_simulations=8, num_workers=1, games_per_worker=1, leaves_per_game=1, cache_size=0, seed=5)

    def play(first: int, games: int) -> dict:
        with SelfPlay("uniform", **options) as engine:
            engine.next_game_id = first
            return engine.run(games)

    whole, merged = play(0, 5), merge_runs([play(0, 3), play(3, 2)], wall_s=2.0)
    assert merged.keys() == whole.keys()
    for key in whole.keys() - {"metrics"}:
        assert np.array_equal(np.asarray(merged[key]), np.asarray(whole[key])), key
    got, want = merged["metrics"], whole["metrics"]
    for key in ("games", "positions", "simulations", "evaluations", "batches", "terminal_leaves"):
        assert got[key] == want[key], key
    assert got["batch_size_hist"] == want["batch_size_hist"] and got["mean_batch_size"] == want["mean_batch_size"]
    assert got["positions_per_s"] == want["positions"] / 2.0 and got["actors"] == 2
