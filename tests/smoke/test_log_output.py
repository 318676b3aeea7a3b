"""`python train.py ... > log.txt 2>&1` reads cleanly: no escapes, no ads, no wrapped bars."""

from __future__ import annotations

import io
import subprocess
import sys
from types import SimpleNamespace

import pytest
from rich.progress import Progress

from meeple.callbacks.progress import LINE_WIDTH, MeepleProgressBar, PlainProgress, progress_bar
from meeple.cli_progress import LineProgress, task_progress
from tests.conftest import REPO


@pytest.mark.parametrize("experiment", [[], ["+experiment=connect4_alphazero"], ["+experiment=pixels_ppo"]],
                         ids=["default", "connect4_alphazero", "pixels_ppo"])
def test_a_log_file_reads_cleanly(tmp_path, experiment):
    # stdout and stderr into one pipe, as `> log.txt 2>&1` does
    done = subprocess.run([sys.executable, str(REPO / "train.py"), *experiment, "debug=tiny", "tracking=none"],
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    log = done.stdout
    assert done.returncode == 0, log[-3000:]
    assert "\x1b[" not in log, "ANSI escape codes in a log file"
    assert "\r" not in log, "carriage returns (a bar redrawn in place) in a log file"
    assert "litlogger" not in log
    assert "Warp CUDA warning" not in log and "Warp 1." not in log  # CPU is the expected case here
    epochs = [line for line in log.splitlines() if line.startswith("epoch ")]
    assert epochs, log[-3000:]
    assert all(len(line) <= LINE_WIDTH for line in epochs), epochs
    assert not any("━" in line for line in log.splitlines()), "a rich bar's frame in a log file"


def _trainer(epoch, max_epochs=10):
    return SimpleNamespace(current_epoch=epoch, max_epochs=max_epochs, global_step=7 * (epoch + 1))


def test_plain_lines_are_short_and_spaced_in_time(monkeypatch, capsys):
    bar = PlainProgress(min_interval_s=3600)
    metrics = {"return": 21.345678, "eval_return": 500.0, "loss": "0.213"}
    metrics.update({f"extra_metric_{i}": 1.0 for i in range(8)})  # too many for one line
    monkeypatch.setattr(bar, "get_metrics", lambda trainer, module: metrics)
    bar.on_train_start(None, None)
    for epoch in range(10):
        bar.on_train_epoch_end(_trainer(epoch), None)
    lines = capsys.readouterr().out.splitlines()
    # the first epoch, then nothing for an hour, then the last one
    assert [line.split()[1] for line in lines] == ["1/10", "10/10"]
    assert lines[1].startswith("epoch 10/10 step 70 ") and "return=21.35 eval_return=500 loss=0.213" in lines[1]
    assert all(len(line) <= LINE_WIDTH for line in lines) and lines[1].endswith("...")


def test_the_rich_bar_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr("meeple.callbacks.progress.is_terminal", lambda stream=None: False)
    assert isinstance(progress_bar(leave=True), PlainProgress)
    monkeypatch.setattr("meeple.callbacks.progress.is_terminal", lambda stream=None: True)
    assert isinstance(progress_bar(leave=True), MeepleProgressBar)


def test_a_long_epoch_gets_lines_within_it(monkeypatch, capsys):
    # phase 1 over a corpus: ~7 min per epoch on CPU, so a line a minute, not one per epoch
    clock = iter([0.0, 10.0, 30.0, 61.0, 100.0, 125.0, 130.0])
    monkeypatch.setattr("meeple.callbacks.progress.time.monotonic", lambda: next(clock))
    monkeypatch.setattr(PlainProgress, "total_train_batches", 2413)
    bar = PlainProgress(min_interval_s=3600, batch_interval_s=60)
    monkeypatch.setattr(bar, "get_metrics", lambda trainer, module: {"val_acc": 0.81234})
    bar.on_train_start(None, None)
    for batch_idx in range(5):
        bar.on_train_batch_end(SimpleNamespace(current_epoch=0, max_epochs=6, global_step=batch_idx + 1),
                               None, None, None, batch_idx)
    bar.on_train_epoch_end(_trainer(0, max_epochs=6), None)  # 30 s after the last line: not yet
    lines = capsys.readouterr().out.splitlines()
    # the first batch (the run is moving), then one a minute: none at 30 s or 61 s (51 s after)
    assert lines == ["epoch 1/6 batch 1/2413 step 1 10s val_acc=0.8123",
                     "epoch 1/6 batch 4/2413 step 4 100s val_acc=0.8123"]


def test_a_long_command_prints_progress_lines_in_a_log(monkeypatch):
    # `python -m meeple_mahjong.duplicate ... > log 2>&1`: rich shows nothing there for an hour
    clock = iter([0.0, 5.0, 20.0, 40.0, 50.0, 80.0, 81.0])
    monkeypatch.setattr("meeple.cli_progress.time.monotonic", lambda: next(clock))
    out = io.StringIO()
    with LineProgress(interval_s=30, stream=out) as bar:
        task = bar.add_task("teacher vs 3x phase1", total=1000)  # t=0
        for done in (8, 16, 400, 408):  # t=5 (the first: printed), 20, 40 (35 s later: printed), 50
            bar.update(task, completed=done)
        bar.advance(task, 592)  # t=80: the last, printed however soon
        bar.update(task, completed=1000)  # t=81: already reported
    assert out.getvalue().splitlines() == ["teacher vs 3x phase1: 8/1000 (1%), 5s, ~10m 20s left",
                                           "teacher vs 3x phase1: 400/1000 (40%), 40s, ~1m 00s left",
                                           "teacher vs 3x phase1: 1000/1000 (100%), 1m 20s"]
    monkeypatch.setattr("meeple.cli_progress.is_terminal", lambda stream=None: True)
    assert isinstance(task_progress(), Progress)
