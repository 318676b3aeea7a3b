"""Pooling paired duplicate summaries: shards of one evaluation pool to exactly that evaluation."""

import json

import pytest

from meeple_mahjong import duplicate as dup
from meeple_mahjong import duplicate_pool as dpool

# rule-nofold against the rule bot, each against three random bots: cheap, and not level
_PAIR = ["--challenger", "rule-nofold", "--baseline", "rule", "--opponent", "random", "--seed", "3"]


def _run(tmp_path, name, *extra):
    out = tmp_path / f"{name}.json"
    assert dup.main([*_PAIR, *extra, "--out", str(out)]) == 0
    return out


def test_shards_pool_to_the_evaluation_they_split(tmp_path, capsys):
    whole = json.loads(_run(tmp_path, "whole", "--games", "6").read_text())
    a = _run(tmp_path, "a", "--games", "4")
    b = _run(tmp_path, "b", "--games", "2", "--first-game", "4")
    out = tmp_path / "pooled.json"
    assert dpool.main([str(a), str(b), "--out", str(out)]) == 0
    pooled = json.loads(out.read_text())
    assert pooled["game_indices"] == 6 and pooled["indices_by_seed"] == {"3": 6}
    assert pooled["paired"]["n"] == whole["paired"]["n"] == 6
    assert pooled["paired"]["mean_diff"] == pytest.approx(whole["paired"]["mean_diff"])
    assert pooled["paired"]["p"] == pytest.approx(whole["paired"]["p"])
    for role in ("challenger", "baseline"):
        for k in ("avg_rank", "win_rate", "deal_in_rate"):
            assert pooled[role][k] == pytest.approx(whole[role][k])
        assert pooled[role]["hands"] == whole[role]["hands"]
    assert pooled["players"]["challenger"] == "rule-nofold" and pooled["players"]["baseline"] == "rule"
    assert "paired over 6 game indices" in capsys.readouterr().out


def test_what_cannot_be_pooled_is_refused_in_one_line(tmp_path, capsys):
    a = _run(tmp_path, "a", "--games", "2")
    b = _run(tmp_path, "b", "--games", "2", "--first-game", "1")  # index 1 in both
    other = tmp_path / "other.json"
    assert dup.main(["--challenger", "rule", "--baseline", "rule-nofold", "--opponent", "random",
                     "--seed", "3", "--games", "2", "--first-game", "2", "--out", str(other)]) == 0  # fmt: skip
    unpaired = tmp_path / "unpaired.json"
    assert dup.main(["--challenger", "rule", "--opponent", "random", "--games", "2", "--out", str(unpaired)]) == 0
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    capsys.readouterr()
    cases = [
        ([a, b], "both hold game index 1 of seed 3: the same walls would count twice"),
        ([a, other], "its challenger is 'rule'"),
        ([a, unpaired], "not a paired duplicate summary"),
        ([a, broken], "not a readable JSON file"),
    ]
    for paths, message in cases:
        assert dpool.main([str(p) for p in paths]) == 2
        err = capsys.readouterr().err
        assert err.startswith("meeple: error:") and message in err and err.count("\n") == 1


def test_versus_pairs_two_challengers_evaluated_apart_on_the_same_walls(tmp_path, capsys):
    # the pair of _PAIR, played as two challenger-only evaluations (the second in two shards)
    whole = json.loads(_run(tmp_path, "whole", "--games", "4").read_text())
    solo = ["--opponent", "random", "--seed", "3"]

    def alone(name, who, *extra):
        out = tmp_path / f"{name}.json"
        assert dup.main(["--challenger", who, *solo, *extra, "--out", str(out)]) == 0
        return str(out)

    a = alone("a", "rule-nofold", "--games", "4")
    b0, b1 = alone("b0", "rule", "--games", "2"), alone("b1", "rule", "--games", "2", "--first-game", "2")
    out = tmp_path / "versus.json"
    capsys.readouterr()
    assert dpool.main([a, "--versus", b0, b1, "--out", str(out)]) == 0
    v = json.loads(out.read_text())
    assert v["players"]["challenger"] == "rule-nofold" and v["players"]["baseline"] == "rule"
    assert v["paired"]["n"] == 4  # what the one paired evaluation of both printed
    assert v["paired"]["mean_diff"] == pytest.approx(whole["paired"]["mean_diff"])
    assert v["paired"]["p"] == pytest.approx(whole["paired"]["p"])
    assert v["baseline"]["avg_rank"] == pytest.approx(whole["baseline"]["avg_rank"])
    assert "challenger - versus" in capsys.readouterr().out
    # other walls, or other opponents, are refused in one line
    fewer = alone("fewer", "rule", "--games", "3")
    other = tmp_path / "other.json"
    assert dup.main(["--challenger", "rule", "--opponent", "rule", "--seed", "3", "--games", "4", "--out", str(other)]) == 0
    capsys.readouterr()
    for versus_, message in (([fewer], "the two sides hold different walls"), ([str(other)], "its opponent is 'rule'")):
        assert dpool.main([a, "--versus", *versus_]) == 2
        err = capsys.readouterr().err
        assert err.startswith("meeple: error:") and message in err and err.count("\n") == 1


def test_challenger_only_shards_pool_to_the_test_against_2_5(tmp_path, capsys):
    solo = ["--challenger", "rule-nofold", "--opponent", "rule", "--seed", "3"]
    paths = []
    for name, extra in (("whole", ["--games", "6"]), ("s0", ["--games", "4"]), ("s1", ["--games", "2", "--first-game", "4"])):
        paths.append(tmp_path / f"{name}.json")
        assert dup.main([*solo, *extra, "--out", str(paths[-1])]) == 0
    whole = json.loads(paths[0].read_text())
    out = tmp_path / "pooled.json"
    capsys.readouterr()
    assert dpool.main([str(paths[1]), str(paths[2]), "--out", str(out)]) == 0
    pooled = json.loads(out.read_text())
    assert pooled["game_indices"] == 6 and "paired" not in pooled
    assert pooled["vs_even"]["p"] == pytest.approx(whole["challenger"]["vs_even"]["p"])
    assert pooled["challenger"]["avg_rank"] == pytest.approx(whole["challenger"]["avg_rank"])
    assert pooled["challenger"]["hands"] == whole["challenger"]["hands"]
    assert "vs 2.5 over 6 game indices" in capsys.readouterr().out


def test_a_network_is_one_player_by_content_under_two_paths(tmp_path):
    """Summaries recording the checkpoint's SHA-256 pool one file copied to two run folders; other
    content, or a summary without the digest under another path, is another player."""
    a = json.loads(_run(tmp_path, "a", "--games", "2").read_text())
    b = json.loads(_run(tmp_path, "b", "--games", "2", "--first-game", "2").read_text())

    def network(summary, name, path, digest):
        out = tmp_path / f"{name}.json"
        s = dict(summary, checkpoint=path, challenger_bot=path)
        if digest:
            s["checkpoint_sha256"] = digest
        out.write_text(json.dumps(s))
        return out

    same = [network(a, "a1", "run1/gates/phase1.pt", "ab" * 32), network(b, "b1", "run2/gates/phase1.pt", "ab" * 32)]
    assert dpool.pool(same)["game_indices"] == 4
    other = network(b, "b2", "run1/gates/phase1.pt", "cd" * 32)  # same path, other content
    with pytest.raises(dpool.PoolError, match="its challenger is"):
        dpool.pool([same[0], other])
    old = network(b, "b3", "run2/gates/phase1.pt", None)  # no digest: by path
    with pytest.raises(dpool.PoolError, match="its challenger is"):
        dpool.pool([same[0], old])
    assert dpool.pool([same[0], network(b, "b4", "run1/gates/phase1.pt", None)])["game_indices"] == 4


def test_across_runs_pools_different_networks_each_on_its_own_walls(tmp_path, capsys):
    """--across-runs: side A is one player on seed 3 and another on seed 4 (a recipe's two training
    seeds), side B likewise; refused without the flag, and with it the paired test over all four
    samples, each side's players listed."""

    def alone(name, who, seed):
        out = tmp_path / f"{name}.json"
        assert dup.main(["--challenger", who, "--opponent", "random", "--seed", seed, "--games", "2",
                         "--out", str(out)]) == 0  # fmt: skip
        return str(out)

    a = [alone("a3", "rule-nofold", "3"), alone("a4", "rule", "4")]
    b = [alone("b3", "rule", "3"), alone("b4", "rule-nofold", "4")]
    capsys.readouterr()
    assert dpool.main([*a, "--versus", *b]) == 2
    assert "its challenger is 'rule'" in capsys.readouterr().err
    out = tmp_path / "runs.json"
    assert dpool.main(["--across-runs", *a, "--versus", *b, "--out", str(out)]) == 0
    v = json.loads(out.read_text())
    assert v["players"]["challenger"] == "rule-nofold + rule" and v["players"]["baseline"] == "rule + rule-nofold"
    ranks = [json.loads(open(p).read())["challenger"]["per_index_rank"] for p in (*a, *b)]
    diffs = [ranks[i][g] - ranks[i + 2][g] for i in (0, 1) for g in ranks[i]]
    assert v["paired"]["n"] == 4 and v["paired"]["mean_diff"] == pytest.approx(sum(diffs) / 4)
    assert v["indices_by_seed"] == {"3": 2, "4": 2}
    # two summaries of the same walls still count once only
    assert dpool.main(["--across-runs", a[0], b[0]]) == 2
    assert "both hold game index" in capsys.readouterr().err


def test_readiness_on_pooled_shards_reads_what_the_whole_evaluation_reads(tmp_path, capsys):
    """--readiness checks the pooled challenger of challenger-only shards: the same values and
    verdict as `duplicate --readiness` on the evaluation they split. The shards here play three
    random bots and are relabelled as played against a network (what --readiness requires); a bot
    opponent and a paired pool are refused in one line."""
    from meeple_mahjong.readiness import check_readiness

    solo = ["--challenger", "rule", "--opponent", "rule-nofold", "--seed", "3"]

    def shard(name, *extra, network=True):
        out = tmp_path / f"{name}.json"
        assert dup.main([*solo, *extra, "--out", str(out)]) == 0
        s = json.loads(out.read_text())
        if network:
            s["opponent_policy"] = {"checkpoint": "runs/x/gates/phase1.pt"}
        out.write_text(json.dumps(s))
        return out

    whole = json.loads(shard("whole", "--games", "4").read_text())
    expected = check_readiness(whole["challenger"])
    assert whole["challenger"]["vs_even"] is not None  # a p-value to pool, not nan on both sides
    a, b = shard("a", "--games", "2"), shard("b", "--games", "2", "--first-game", "2")
    out = tmp_path / "pooled.json"
    capsys.readouterr()
    code = dpool.main([str(a), str(b), "--readiness", "--out", str(out)])
    assert code == (0 if expected["passed"] else 1)
    got = json.loads(out.read_text())["readiness"]
    assert [c["passed"] for c in got["checks"]] == [c["passed"] for c in expected["checks"]]
    for mine, theirs in zip(got["checks"], expected["checks"], strict=True):
        assert mine["metric"] == theirs["metric"] and mine["value"] == pytest.approx(theirs["value"], nan_ok=True)
    assert "readiness gate (from_student_ready.yaml)" in capsys.readouterr().out
    bots = shard("bots", "--games", "2", "--first-game", "4", network=False)
    paired = _run(tmp_path, "paired", "--games", "2")
    capsys.readouterr()
    for paths, message in [([bots], "the opponent is the 'rule-nofold' bot"),
                           ([paired], "--readiness pools challenger-only shards")]:
        assert dpool.main([*map(str, paths), "--readiness"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
