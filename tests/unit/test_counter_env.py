"""The counter env (the transports' test and benchmark env): its two record writers (record
by record for small batches, numpy for larger) write the same bytes, and the records say
what the module promises."""

import numpy as np
import pytest

import meeple.envs.counter as counter
from meeple.envs.counter import CounterEnv


def run(env: CounterEnv, seed: int, actions: list[np.ndarray], fresh_every: int) -> list[bytes]:
    n = env.spaces.num_envs
    out = env.spaces.new_records(n)
    env.reset(seed, out)
    frames = [out.tobytes()]
    for k, a in enumerate(actions):
        if k % fresh_every == fresh_every - 1:  # array envs may get a new buffer any call
            out = env.spaces.new_records(n)
        env.step(a, out)
        frames.append(out.tobytes())
        if k % 7 == 3:
            env.observe(out)
            frames.append(out.tobytes())
    return frames


@pytest.mark.parametrize("num_envs", [1, 3, 6])
@pytest.mark.parametrize("truncate", [False, True])
def test_rowwise_and_numpy_writers_agree(monkeypatch, num_envs, truncate):
    rng = np.random.default_rng(num_envs)
    actions = [rng.integers(0, 92, num_envs).astype(np.int32) for _ in range(30)]
    seed = 2**40 + 12345  # large: the observation's float32 rounding must match numpy's
    kwargs = dict(obs_size=612, num_actions=92, episode_length=4, truncate=truncate)
    rowwise = run(CounterEnv(num_envs, **kwargs), seed, actions, fresh_every=5)
    monkeypatch.setattr(counter, "ROWWISE_MAX", 0)
    arrays = run(CounterEnv(num_envs, **kwargs), seed, actions, fresh_every=5)
    assert rowwise == arrays


@pytest.mark.parametrize("num_envs", [2, 6])
def test_records_follow_the_counter(num_envs):
    env = CounterEnv(num_envs, obs_size=5, num_actions=4, episode_length=3, truncate=True)
    out = env.spaces.new_records(num_envs)
    env.reset(10, out)
    start = 10 + np.arange(num_envs)
    for t in (1, 2, 3, 4):
        actions = np.full(num_envs, (t + 1) % 4, dtype=np.int32)
        env.step(actions, out)
        done = t == 3
        clock = 0 if done else t % 3
        if done:
            start = start + 1000
        np.testing.assert_array_equal(out["reward"], actions)
        assert (out["done"] == done).all() and (out["truncated"] == done).all()
        np.testing.assert_array_equal(out["obs"][:, 0], clock)
        np.testing.assert_array_equal(out["obs"][:, 1], actions)
        np.testing.assert_array_equal(out["obs"][:, 2], start)
        np.testing.assert_array_equal(out["obs"][:, 3:], 0)
        np.testing.assert_array_equal(out["info_t"], clock)
        legal = np.ones((num_envs, 4), dtype=np.uint8)
        legal[:, clock % 4] = 0
        np.testing.assert_array_equal(out["mask"], legal)
    env.observe(out)
    assert (out["reward"] == 0).all() and not out["done"].any()
