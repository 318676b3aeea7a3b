"""Screenshots of the viewer for docs/viewer.md, taken in headless Chromium (as the browser tests
drive it: Debian's chromium + chromium-driver, selenium):

    python tools/viewer_screenshots.py            # writes docs/viewer/*.png
    python tools/viewer_screenshots.py --mahjong-checkpoint outputs/runs/<run>/gates/phase1.pt

* ``mahjong-review.png``: the review page of the shipped real log (plugins/mahjong/tests/data),
  seat 2 reviewed by a fresh tiny checkpoint (or ``--mahjong-checkpoint``: a trained one), at a
  decision the policy disagrees with;
* ``chess-replay.png``: a replay of two MCTS players (a fresh tiny network), in the middle game;
* ``connect4-play.png``: the play page against a fresh tiny checkpoint, a few moves in.

The AlphaZero networks are untrained: those pictures show the pages, not strength.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the browser tests' driver and checkpoints

from tests.browser.checkpoints import alphazero_checkpoint, mahjong_checkpoint  # noqa: E402
from tests.browser.driver import browser_missing, headless_chrome, serving  # noqa: E402

from meeple.viewer.page import write_replay  # noqa: E402
from meeple.viewer.play_server import PlayServer  # noqa: E402

OUT = REPO / "docs" / "viewer"
LOG = REPO / "plugins" / "mahjong" / "tests" / "data" / "riichienv_126_204_0.mjson"


def show_step(driver, index: int) -> None:
    """Moves a replay page to step ``index`` (0-based) through its slider."""
    slider = driver.find_element("id", "slider")
    driver.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))",
                          slider, index + 1)  # fmt: skip


def mahjong_review(driver, work: Path, checkpoint: Path | None = None) -> Path:
    from meeple_mahjong.mjai import read_lines
    from meeple_mahjong.policy import load_policy_heads
    from meeple_mahjong.replay import DISAGREE, games_of, review_game
    from meeple_mahjong.viewer import renderer

    heads, _ = load_policy_heads(checkpoint or mahjong_checkpoint(work / "mahjong.pt"))
    who = f"{checkpoint.parent.parent.name}/{checkpoint.name}" if checkpoint else "tiny untrained policy"
    replay = review_game(games_of(read_lines(LOG))[0], heads, [2], title=f"review of seat 2 ({who})")
    driver.set_window_size(1440, 1300)  # the table beside its decision panel
    driver.get(write_replay(work / "review.html", replay, with_renderer=renderer()).as_uri())
    # a disagreement some way into the first hand, with a few discards in every river
    at = next(i for i, s in enumerate(replay.steps) if i > 60 and DISAGREE in s.marks and s.decision)
    show_step(driver, at)
    return shot(driver, "mahjong-review.png")


def chess_replay(driver, work: Path) -> Path:
    from meeple.export.policy import load_alphazero_network
    from meeple.phases.alphazero.evaluator import TorchEvaluator
    from meeple_chess.arena import MCTSPlayer
    from meeple_chess.replay import record_game, renderer

    net = load_alphazero_network(alphazero_checkpoint("chess", work / "chess.pt"), "chess")
    players = [MCTSPlayer(TorchEvaluator(net), num_simulations=96, leaves_in_flight=1, seed=s) for s in (1, 2)]
    replay = record_game(players, ["white (MCTS)", "black (MCTS)"], "chess: MCTS with a tiny untrained network, "
                         "96 simulations", opening_moves=6, max_plies=30)  # sampled openings differ
    driver.set_window_size(1280, 860)
    driver.get(write_replay(work / "chess.html", replay, with_renderer=renderer()).as_uri())
    show_step(driver, min(24, len(replay.steps) - 2))
    return shot(driver, "chess-replay.png")


def connect4_play(driver, work: Path) -> Path:
    from meeple_connect4.play import session
    from meeple_connect4.replay import renderer

    ckpt = str(alphazero_checkpoint("connect4", work / "c4.pt"))
    server = PlayServer(lambda seed: session(ckpt, seed=seed, simulations=64), "connect4", renderer(), seed=0)
    with serving(server):
        driver.set_window_size(1280, 720)
        driver.get(server.url)
        for column in (3, 3, 2):
            wait_for_your_move(driver)
            driver.find_element("css selector", f'#board .c4-head[data-col="{column}"]').click()
            time.sleep(0.2)
        wait_for_your_move(driver)
        return shot(driver, "connect4-play.png")


def wait_for_your_move(driver) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 20).until(lambda d: d.find_element("id", "status").text == "Your move")


def shot(driver, name: str) -> Path:
    path = OUT / name
    driver.save_screenshot(str(path))
    print(f"wrote {path.relative_to(REPO)}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mahjong-checkpoint", type=Path, help="a mahjong checkpoint for the review (default: "
                        "a fresh tiny one)")
    args = parser.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"viewer_screenshots: {missing}", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    driver = headless_chrome(1280, 860)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            mahjong_review(driver, Path(tmp), args.mahjong_checkpoint)
            chess_replay(driver, Path(tmp))
            connect4_play(driver, Path(tmp))
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
