"""The real CLI in subprocesses, from an empty folder, as a user would run it."""

import subprocess
import sys

import mlflow
import pytest

from tests.conftest import REPO

TRAIN = str(REPO / "train.py")


def train(cwd, *args, timeout=300):
    return subprocess.run(
        [sys.executable, TRAIN, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )


def test_debug_tiny_runs_every_stage_and_is_tracked(tmp_path):
    done = train(tmp_path, "debug=tiny", "seed=3")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "final greedy evaluation" in done.stderr + done.stdout

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/outputs/mlflow.db")
    experiment = client.get_experiment_by_name("default")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert tags["seed"] == "3" and tags["hardware"] == "cpu" and tags["experiment"] == "default"
    assert "git_sha" in tags
    params = run.data.params
    assert params["phase/rollout_steps"] == "16" and params["seed"] == "3"
    metrics = run.data.metrics
    for key in ("eval/episode_return", "perf/frames_per_s", "train/episode_return", "loss/total",
                "loss/objective", "loss/critic"):
        assert key in metrics, sorted(metrics)
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id)]
    assert "config.yaml" in artifacts
    assert (tmp_path / "outputs" / "mlartifacts").is_dir() and not (tmp_path / "mlruns").exists()


def test_experiment_and_overrides_and_print_config(tmp_path):
    done = train(tmp_path, "+experiment=cartpole_ppo", "hardware=cpu", "seed=7", "phase.lr=1e-3", "--cfg", "job")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "experiment_name: cartpole_ppo" in done.stdout
    assert "seed: 7" in done.stdout and "lr: 0.001" in done.stdout
    assert not (tmp_path / "outputs").exists(), "--cfg must not run anything"


@pytest.mark.parametrize(
    "args, message",
    [
        (["hardware=h100"], "hardware=h100 needs a CUDA GPU"),
        (["phase.minibatch_size=999999"], "phase.minibatch_size=999999 is larger than one rollout"),
        (["env.backend=nope"], "is not an installed env backend; installed: autobattler, connect4, gym, mahjong"),
    ],
)
def test_user_errors_are_one_clear_line(tmp_path, args, message):
    import torch

    if args == ["hardware=h100"] and torch.cuda.is_available():
        pytest.skip("CUDA present")
    done = train(tmp_path, "debug=tiny", *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_env_lists_installed_envs(tmp_path):
    done = train(tmp_path, "env=nope")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "Could not find 'env/nope'; accepted: autobattler, cartpole, connect4" in done.stderr
    assert done.stderr.count("\n") == 1  # one line, no search-path dump


@pytest.mark.parametrize(
    "args, message",
    [
        (["phase=alphazero"], "does not fit phase=alphazero; accepted: a model built by meeple.nets.az_resnet"),
        (["model=az_resnet"], "change model= with phase= (e.g. model=mlp)"),
        (["phase=dqn"], "env.backend='gym' is not allowed; accepted: pettingzoo"),
        (["seed=abc"], "seed='abc' is not allowed; accepted: null (drawn from os.urandom) or an integer"),
        (["seed=-1"], "seed=-1 is not allowed"),
        (["checkpoint.keep=0"], "checkpoint.keep=0 is not allowed; accepted: an integer >= 1"),
        (["checkpoint.every_n_rollouts=0"], "checkpoint.every_n_rollouts=0 is not allowed"),
        (["checkpoint.min_interval_s=-1"], "checkpoint.min_interval_s=-1 is not allowed; accepted: a number of seconds >= 0"),
        (["env.num_envs=1.5"], "env.num_envs=1.5 is not allowed; accepted: an integer >= 1"),
        (["phase.lr=abc"], "phase.lr='abc' is not allowed; accepted: a float"),
        (["phase.nokey=3"], "Could not override 'phase.nokey'"),
        (["+experiment=cartpole_bc_ppo", "pipeline.stages.ppo.phase.lr=-1"], "stage 'ppo': phase.lr=-1.0 is not allowed"),
        # a transport the phase builds no env through (issue 41: it was silently ignored)
        (["+experiment=independent_dqn", "transport=shm"], "transport=shm is not used by phase=dqn"),
        (["+experiment=pixels_ppo", "transport=shm"], "transport=shm is not used by phase=packed_ppo"),
        # a second driver of the user's server (it printed 48 lines and two tracebacks first)
        (["transport=socket", "transport.address=/tmp/x.sock", "env.num_workers=2"],
         "transport.address=/tmp/x.sock with env.num_workers=2: a server you started hosts one env batch"),
        # an HTTP address servers never bind (it failed after the run directory was made)
        (["transport=http", "transport.address=0.0.0.0:8765"],
         "transport.address='0.0.0.0:8765' for transport=http; accepted: 127.0.0.1:PORT"),
    ],
)
def test_config_mistakes_are_one_line_exit_2_without_importing_torch(tmp_path, args, message):
    done = subprocess.run([sys.executable, "-X", "importtime", TRAIN, *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert errors == [f"meeple: error: {errors[0].removeprefix('meeple: error: ')}"] and message in errors[0]
    assert not any(line.endswith(("| torch", "| lightning", "| torchrl")) for line in done.stderr.splitlines())
    assert not (tmp_path / "outputs" / "runs").exists() and not (tmp_path / "outputs" / "mlflow.db").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["env.id=NoSuchEnv-v0"], "env.id='NoSuchEnv-v0' could not be made by Gymnasium"),
        (["transport=socket", "transport.address={tmp}/none.sock"], "no env server answers there"),
    ],
)
def test_mistakes_found_while_building_print_their_line_alone(tmp_path, args, message):
    """Found after the plan, while the first stage is built: no INFO lines (run directory, master
    seed) before the error, and no run directory left behind (issue 41)."""
    args = [a.format(tmp=tmp_path) for a in args]
    done = subprocess.run([sys.executable, TRAIN, "tracking=none", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("meeple: error:") and message in lines[0], lines
    assert not list((tmp_path / "outputs" / "runs").glob("*"))


def test_multiprocess_collection(tmp_path):
    done = train(tmp_path, "debug=tiny", "env.num_workers=2", "phase.total_frames=256", "tracking=none")
    assert done.returncode == 0, done.stderr[-3000:]


def test_alphazero_debug_tiny_logs_selfplay_gate_and_benchmarks(tmp_path, compose):
    done = train(tmp_path, "+experiment=connect4_alphazero", "debug=tiny", "seed=2")
    assert done.returncode == 0, done.stderr[-3000:]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/outputs/mlflow.db")
    experiment = client.get_experiment_by_name("connect4_alphazero")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["env"] == "connect4" and run.data.tags["phase"] == "alphazero"
    metrics = run.data.metrics
    for key in ("loss/total", "loss/policy", "loss/value", "loss/l2", "selfplay/positions_per_s",
                "selfplay/fill_ratio", "selfplay/evaluator_idle_fraction", "selfplay/queue_latency_p99_us",
                "selfplay/cache_hit_rate", "gate/score", "gate/generation", "eval/win_rate_vs_mcts",
                "eval/win_rate_vs_solver", "eval/generated_middle/optimal_policy", "eval/generated_end/optimal_mcts"):
        assert key in metrics, sorted(metrics)
    assert metrics["selfplay/games"] == 8  # 2 iterations x 4 games
    history = client.get_metric_history(run.info.run_id, "eval/generated_end/optimal_policy")
    assert len(history) == 2  # every iteration
    # the generated sets stand alone; Pons' sets are only measured when benchmark_dir names them
    assert not any("Test_L" in key for key in metrics), sorted(metrics)
    # the objective (sweeps, best.pt) is a metric the default run logs
    assert compose(["+experiment=connect4_alphazero"]).optimized_metric in metrics
    # checkpoints at iteration boundaries hold the gate's best network too
    (run_dir,) = (tmp_path / "outputs" / "runs").iterdir()
    assert (run_dir / "phase0" / "checkpoints" / "latest.pt").exists()


def test_ctrl_c_marks_the_run_killed_and_says_how_to_resume(tmp_path):
    import signal
    import time

    args = [sys.executable, TRAIN, "callbacks.progress=null", "phase.stop.eval_return=null", "seed=4",
            "++tracking.system_metrics=false"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not list(tmp_path.glob("outputs/runs/*/phase0/checkpoints/ckpt_*.pt")):
            assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint before the deadline"
            time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert "meeple: stopped by request; continue this run with the same command and resume=true" in err
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/outputs/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("default").experiment_id])
    assert run.info.status == "KILLED"
    (run_dir,) = (tmp_path / "outputs" / "runs").iterdir()
    assert not (run_dir / "phase0" / "done.json").exists()  # left for resume=true
