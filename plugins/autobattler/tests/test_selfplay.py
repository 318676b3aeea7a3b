"""Self-play through STEP_MULTI: seat rows over every transport, a tiny training run, its
evaluation from the command line."""

import json
import os
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

from meeple.cli.train import train
from meeple.config.compose import compose_config
from meeple.errors import ConfigError
from meeple.transport.client import make_remote_env
from meeple_autobattler import layout as L
from meeple_autobattler.evaluate import main as evaluate

TINY = ["+experiment=autobattler_selfplay", "debug=tiny", "tracking=none", "callbacks.progress=null"]


def seat_trace(transport: str, steps: int = 40) -> np.ndarray:
    """Observations of 16 rows (2 games x 8 seats) under seeded random legal play."""
    env = make_remote_env({"backend": "autobattler", "seats": 8}, {"type": transport}, num_envs=16)
    try:
        env.set_seed(3)
        td = env.reset()
        assert td["observation"].shape == (16, L.OBS_SIZE) and td["action_mask"].shape == (16, L.NUM_ACTIONS)
        rng = np.random.default_rng(0)
        trace = [td["observation"].clone()]
        waited = 0
        for _ in range(steps):
            mask = td["action_mask"].numpy()
            assert mask.any(axis=1).all(), "every row has a legal action (0 for seats not to move)"
            waited += int((mask.sum(axis=1) == 1).sum())
            td["action"] = torch.from_numpy(np.where(mask, rng.random(mask.shape), -1).argmax(axis=1))
            td = env.step(td)["next"]
            trace.append(td["observation"].clone())
        assert waited > 0, "seats that ended their turn wait for the others"
        return np.stack([t.numpy() for t in trace])
    finally:
        env.close()


def test_seat_rows_are_the_same_games_on_every_transport():
    """The same seed and actions give the same rows over socket, shm and HTTP."""
    socket = seat_trace("socket")
    np.testing.assert_array_equal(socket, seat_trace("shm"))
    np.testing.assert_array_equal(socket, seat_trace("http"))


def test_rows_must_be_whole_games():
    with pytest.raises(ConfigError, match="multiple of 8"):
        make_remote_env({"backend": "autobattler", "seats": 8}, {"type": "socket"}, num_envs=12)


def test_tiny_selfplay_trains_and_its_policy_is_evaluated(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # outputs/ and mlflow.db land there
    segments = set(os.listdir("/dev/shm"))
    logged = train(compose_config([*TINY, "transport=shm"]))
    # an in-process run (a sweep trial) stops every server it started: the collector's outlived it
    # while TorchRL took the env for closed (EnvBase starts so) and skipped closing it
    servers = [p.cmdline() for p in psutil.Process().children(recursive=True) if "server.js" in " ".join(p.cmdline())]
    assert servers == [] and set(os.listdir("/dev/shm")) - segments == set()
    assert -3.5 <= logged["eval/episode_return"] <= 3.5  # 4.5 - mean place
    (run,) = Path("outputs/runs").iterdir()
    assert evaluate([str(run), "--opponent", "random", "--games", "8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["games"] == 8 and 1 <= report["mean_place"] <= 8
