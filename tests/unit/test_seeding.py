import numpy as np
import pytest

from meeple.seeding import Component, PhaseSeeds, phase_sequence, resolve_master_seed


def test_component_branch_equals_spawned_child():
    seeds = PhaseSeeds(master=1234, phase=2)
    children = phase_sequence(1234, 2).spawn(len(Component))
    for component in Component:
        expected = int(children[component].generate_state(1)[0])
        assert seeds.seed(component) == expected


def test_components_phases_and_masters_are_independent():
    a = PhaseSeeds(7, 0)
    values = {a.seed(c) for c in Component}
    assert len(values) == len(Component)
    assert PhaseSeeds(7, 1).seed(Component.ENV) != a.seed(Component.ENV)
    # Neighbouring master seeds must not give shifted copies of each other's streams.
    assert set(PhaseSeeds(8, 0).worker_seeds(Component.ENV, 4)).isdisjoint(a.worker_seeds(Component.ENV, 4))


def test_worker_seeds_are_stable_and_distinct():
    seeds = PhaseSeeds(99, 0)
    first = seeds.worker_seeds(Component.ENV, 8)
    assert first == seeds.worker_seeds(Component.ENV, 8)
    assert len(set(first)) == 8
    # Growing the pool keeps existing workers' seeds.
    assert seeds.worker_seeds(Component.ENV, 12)[:8] == first


def test_stream_yields_fresh_reproducible_seeds():
    s1, s2 = PhaseSeeds(5, 0).stream(Component.EVALUATION), PhaseSeeds(5, 0).stream(Component.EVALUATION)
    drawn = [next(s1) for _ in range(5)]
    assert drawn == [next(s2) for _ in range(5)]
    assert len(set(drawn)) == 5
    assert not set(drawn) & set(PhaseSeeds(5, 0).worker_seeds(Component.EVALUATION, 5))


def test_master_seed_from_config_or_urandom():
    assert resolve_master_seed(42) == 42
    drawn = {resolve_master_seed(None) for _ in range(4)}
    assert len(drawn) > 1 and all(0 <= d < 2**32 for d in drawn)
    for bad in (-1, 1.5, "7", True):
        with pytest.raises(ValueError, match="seed"):
            resolve_master_seed(bad)


def test_seed_sequence_type():
    assert isinstance(PhaseSeeds(1, 0).sequence(Component.DATA), np.random.SeedSequence)


def test_ranks_own_their_streams_and_share_the_model_init():
    """A multi-process run: rank 0 keeps the single-process seeds; each other rank draws its
    own envs and sampling, and every rank starts from the same weights."""
    single, rank1, rank2 = PhaseSeeds(3, 1), PhaseSeeds(3, 1, rank=1), PhaseSeeds(3, 1, rank=2)
    assert PhaseSeeds(3, 1, rank=0) == single
    for component in (Component.ENV, Component.DATA, Component.OPPONENT):
        values = {s.seed(component) for s in (single, rank1, rank2)}
        assert len(values) == 3, component
    assert set(rank1.worker_seeds(Component.ENV, 4)).isdisjoint(single.worker_seeds(Component.ENV, 4))
    assert rank1.restart_seeds(Component.DATA, 2, 5) != single.restart_seeds(Component.DATA, 2, 5)
    assert next(rank1.stream(Component.DATA)) != next(single.stream(Component.DATA))
    for component in (Component.MODEL_INIT, Component.EVALUATION):
        assert rank1.seed(component) == single.seed(component) == rank2.seed(component)
