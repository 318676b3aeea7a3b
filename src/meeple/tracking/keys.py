"""Metric keys that dashboards, sweeps and tests rely on (keep them stable)."""

EVAL_RETURN = "eval/episode_return"
TRAIN_RETURN = "train/episode_return"
FRAMES_PER_S = "perf/frames_per_s"
LOSS_TOTAL = "loss/total"
