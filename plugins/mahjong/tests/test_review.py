"""python -m meeple_mahjong.review and meeple_mahjong.replay: a real MJAI log reviewed by a small
random checkpoint, the agreement statistics on crafted decisions, the table state against the
engine's own hands, and bad input as one line with exit code 2."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch

from meeple.checkpoint.io import save_atomic
from meeple.nets.planes import build_planes_actor_critic
from meeple.viewer.page import read_replay
from meeple_mahjong import replay as rp
from meeple_mahjong.corpus.samples import GameSamples, log_games
from meeple_mahjong.mjai import PASS, read_lines, replay_file
from meeple_mahjong.review import main
from meeple_mahjong.specs import action_spec, observation_spec
from meeple_mahjong.viewer import renderer
from meeple_mahjong.viewer.table import Table, tile_key
from meeple_native import mahjong as _mj

LOG = Path(__file__).parent / "data" / "riichienv_126_204_0.mjson"  # a real East-South game (data/README.md)
MODEL = {"_target_": "meeple.nets.planes.build_planes_actor_critic", "_partial_": True,
         "channels": 8, "blocks": 1, "hidden": 16, "shared": True}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # Small batches: on a shared CPU, torch's intra-op threads cost more than they give.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A randomly initialised env=mahjong checkpoint with actor and critic weights."""
    torch.manual_seed(0)
    actor, critic = build_planes_actor_critic(observation_spec(1, oracle=False), action_spec(1),
                                              **{k: v for k, v in MODEL.items() if not k.startswith("_")})  # fmt: skip
    state = {f"actor.{k}": v for k, v in actor.state_dict().items()}
    state.update({f"critic.{k}": v for k, v in critic.state_dict().items()})
    path = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    config = {"model": MODEL, "env": {"backend": "mahjong", "learner_seats": [0]}}
    save_atomic({"model_state_dict": state, "config": config, "checkpoint_version": 1, "global_step": 7}, path)
    return path


def _one_line_error(capsys, needle: str) -> None:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert needle in err, err


def test_a_real_log_is_reviewed_into_a_page(checkpoint, tmp_path, capsys):
    out = tmp_path / "review.html"
    assert main([str(LOG), "--checkpoint", str(checkpoint), "--seat", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "policy's top choice = played" in printed and f"wrote {out}" in printed
    page = out.read_text(encoding="utf-8")
    assert "window.meepleRenderers.mahjong" in page and "http://" not in page and "https://" not in page
    replay = read_replay(out)
    assert replay.game == "mahjong" and replay.meta["global_step"] == 7 and "(step 7)" in replay.title
    decided = [s for s in replay.steps if s.decision is not None]
    stats = replay.meta["agreement"]
    assert len(decided) == stats["all"]["decisions"] > 100
    assert sum(stats[k]["decisions"] for k in rp.KINDS) == stats["all"]["decisions"]
    assert all(s.actor == 2 for s in decided)
    # "disagree" exactly where the policy's top action is not the one played.
    disagree = [s for s in decided if "disagree" in s.marks]
    assert len(disagree) == stats["all"]["decisions"] - stats["all"]["agree"]
    assert all((s.decision.top[0].action != s.action) == ("disagree" in s.marks) for s in decided)
    assert all(s.action in [c.action for c in s.decision.top] for s in decided)  # the played action shows
    assert all(s.decision.value is not None for s in decided)  # the critic's value
    # Every event is drawn: the wins of the log are marked, its final scores are the result's.
    events = [json.loads(line) for line in read_lines(LOG)]
    assert sum("win" in s.marks for s in replay.steps) == sum(e["type"] == "hora" for e in events)
    assert replay.result["scores"] == replay_file(LOG).final_scores[0]
    assert replay.steps[-1].state["scores"] == replay.result["scores"]


class _FirstLegal:
    """A scorer whose top action is the lowest legal index (probability 0.6, the rest spread)."""

    oracle = False

    def __call__(self, obs, mask):
        probs = mask.float() * 0.4 / mask.sum(1, keepdim=True)
        first = mask.float().argmax(1)
        probs[torch.arange(len(mask)), first] += 0.6
        return probs, None


def test_agreement_counts_the_decisions_the_samples_path_records():
    # The decisions review_game scores are the samples meeple_mahjong.corpus records for the
    # same seat (with more than one legal action): the agreement of "the lowest legal index"
    # follows from those samples alone.
    (samples,) = [g for g in log_games(LOG) if isinstance(g, GameSamples)]
    s = samples.samples
    mine = (s["seat"] == 1) & (s["mask"].sum(1) >= 2)
    first = s["mask"][mine].argmax(1)
    played = s["action"][mine]
    (game,) = rp.games_of(read_lines(LOG))
    replay = rp.review_game(game, _FirstLegal(), [1])
    stats = replay.meta["agreement"]["all"]
    assert stats["decisions"] == int(mine.sum())
    assert stats["agree"] == int((first == played).sum())
    p_played = np.where(first == played, 0.6, 0.0) + 0.4 / s["mask"][mine].sum(1)
    assert stats["mean_p_played"] == pytest.approx(float(p_played.mean()), rel=1e-5)
    assert replay.summary["policy's top choice = played"].endswith(f"({stats['agree']} / {stats['decisions']})")


def _decision(played: int, top: int, kind: str, p_played: float) -> rp.SeatDecision:
    probs = np.zeros(155, np.float32)
    probs[top] = max(p_played, 0.5) if top == played else 0.5
    probs[played] = p_played if played != top else probs[top]
    mask = probs > 0
    return rp.SeatDecision(0, 0, np.zeros((84, 34), np.float32), mask, None, {}, played, probs, None, kind)


def test_agreement_per_kind_on_crafted_decisions():
    ds = [_decision(3, 3, "discard", 0.9), _decision(3, 5, "discard", 0.2), _decision(40, 40, "riichi", 0.7),
          _decision(PASS, 80, "call", 0.1), _decision(152, 152, "win", 1.0)]  # fmt: skip
    stats = rp.agreement(ds)
    assert stats["all"] == {"decisions": 5, "agree": 3, "agreement": 0.6,
                            "mean_p_played": pytest.approx((0.9 + 0.2 + 0.7 + 0.1 + 1.0) / 5)}  # fmt: skip
    assert stats["discard"]["agreement"] == 0.5 and stats["discard"]["decisions"] == 2
    assert stats["riichi"]["agreement"] == 1.0 and stats["call"]["agreement"] == 0.0
    assert stats["win"]["agree"] == 1
    rows = rp.summary_table(stats, ["me"])
    assert rows["policy's top choice = played"] == "60.0% (3 / 5)"
    assert rp.agreement([])["all"] == {"decisions": 0, "agree": 0, "agreement": None, "mean_p_played": None}


def test_decision_kinds_and_labels():
    mask = np.zeros(155, np.bool_)
    mask[[3, 7]] = True
    assert rp.decision_kind(mask, 3) == "discard"
    mask[40] = True
    assert rp.decision_kind(mask, 3) == "riichi"
    mask[PASS] = True
    assert rp.decision_kind(mask, PASS) == "call"
    mask[152] = True
    assert rp.decision_kind(mask, PASS) == "win"
    assert [rp.index_label(i) for i in (4, 34, 36, 37 + 27, 83 + 31, 117 + 0, 151, 152, 153, 154)] == [
        "discard 5m", "discard 5mr", "discard 5sr", "riichi E", "ankan P", "kakan 1m", "tsumo", "ron", "pass",
        "kyushu kyuhai"]  # fmt: skip
    assert rp.event_label({"type": "chi", "pai": "3m", "consumed": ["5m", "4m"]}) == "chi 3m (4m 5m)"


def test_the_table_holds_the_engine_hands_at_every_win_and_draw():
    # Engine games carry each winner's closed hand (hora_tehais) and the tenpai hands at a draw.
    checked = 0
    for index in range(3):
        g = _mj.Game()
        g.reset(11, index)
        g.greedy_playout(index, 0.5)
        table = Table()
        for ev in map(json.loads, g.events()):
            table.apply(ev)
            s = table.s
            if ev["type"] == "hora":
                seat = ev["actor"]
                held = s["hands"][seat] + ([s["drawn"][seat]] if s["drawn"][seat] else [])
                assert sorted(held, key=tile_key) == sorted(ev["hora_tehais"], key=tile_key)
                checked += 1
            elif ev["type"] == "ryukyoku":
                for seat, tiles in enumerate(ev.get("tehais") or []):
                    if tiles and tiles[0] != "?":
                        assert sorted(s["hands"][seat], key=tile_key) == sorted(tiles, key=tile_key)
                        checked += 1
            if ev["type"] in ("dahai", "hora", "ryukyoku"):  # 13 tiles in hand and melds (a kan counts 3)
                for seat in range(4):
                    n = len(s["hands"][seat]) + 3 * len(s["melds"][seat])
                    n += s["drawn"][seat] is not None
                    assert n in (13, 14), (ev, seat, s)
    assert checked > 10


def test_the_renderer_is_the_declared_viewer():
    r = renderer()
    assert r.game == "mahjong" and "meepleRenderers.mahjong" in r.js and ".tile" in r.css
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["meeple.viewers"] == {"mahjong": "meeple_mahjong.viewer:renderer"}


def test_bad_input_is_one_line_and_exit_code_2(checkpoint, tmp_path, capsys):
    out = str(tmp_path / "r.html")
    assert main([str(tmp_path / "missing.mjson"), "--checkpoint", str(checkpoint), "--out", out]) == 2
    _one_line_error(capsys, "missing.mjson: file not found")
    broken = tmp_path / "broken.mjson"
    lines = LOG.read_text().splitlines()
    broken.write_text("\n".join([*lines[:40], '{"type": "dahai", "actor": 9, "pai": "5m"}', *lines[41:]]))
    assert main([str(broken), "--checkpoint", str(checkpoint), "--out", out]) == 2
    _one_line_error(capsys, "broken.mjson:41: ")
    empty = tmp_path / "empty.mjson"
    empty.write_text("\n")
    assert main([str(empty), "--checkpoint", str(checkpoint), "--out", out]) == 2
    _one_line_error(capsys, "no events")
    assert main([str(LOG), "--checkpoint", str(LOG), "--out", out]) == 2  # not a checkpoint
    _one_line_error(capsys, "--checkpoint: ")
    assert main([str(LOG), "--checkpoint", str(tmp_path), "--out", out]) == 2  # a folder without one
    _one_line_error(capsys, "--checkpoint: ")
    assert main([str(LOG), "--checkpoint", str(checkpoint), "--game", "3", "--out", out]) == 2
    _one_line_error(capsys, "the log holds 1 game(s)")
    with pytest.raises(SystemExit) as exit_:
        main([str(LOG), "--checkpoint", str(checkpoint), "--seat", "4"])
    assert exit_.value.code == 2
    _one_line_error(capsys, "--seat 4: accepted: a seat number 0-3")
    assert not Path(out).exists()


def test_an_east_only_game_needs_its_rule(checkpoint, tmp_path, capsys):
    g = _mj.Game(east_only=True)
    g.reset(5, 0)
    g.greedy_playout(0, 0.3)
    log = tmp_path / "east.mjson"
    log.write_text("\n".join(g.events()) + "\n")
    out = tmp_path / "east.html"
    assert main([str(log), "--checkpoint", str(checkpoint), "--out", str(out)]) == 2
    _one_line_error(capsys, "--east-only reviews an East-only game")
    assert main([str(log), "--checkpoint", str(checkpoint), "--out", str(out), "--east-only", "--all-seats"]) == 0
    replay = read_replay(out)
    assert replay.meta["seats"] == [0, 1, 2, 3] and replay.result["scores"] == list(g.scores)
    assert {s.actor for s in replay.steps if s.decision} == {0, 1, 2, 3}
