"""Dump every experiment's resolved config, so that moving configs can be shown to change nothing.

    python tools/compose_snapshot.py OUT_DIR

For each recipe Hydra can find (core ``conf/experiment/`` and every plugin's), without a debug
mode and with ``debug=tiny`` and ``debug=overfit``, writes ``OUT_DIR/<experiment>[.<mode>].yaml``: the composed config (what
``python train.py +experiment=X`` runs with, Hydra's own keys removed) and each planned stage's
config (debug sizes merged, as ``pipeline.plan`` hands it to the phase), all resolved. Compare two
snapshots with ``diff -r``. A recipe that does not compose or plan records its error instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import OmegaConf

from meeple.config.compose import compose_config, group_options


def snapshot(overrides: list[str], config_name: str = "train") -> str:
    from meeple.pipeline.plan import plan_run

    try:
        cfg = compose_config(overrides, config_name=config_name)
    except Exception as err:  # noqa: BLE001 - recorded, so that a difference in failures shows too
        return f"compose error: {type(err).__name__}: {err}\n"
    parts = [OmegaConf.to_yaml(cfg, resolve=True)]
    if config_name != "train":
        return parts[0]
    try:
        for stage in plan_run(cfg).stages:
            parts.append(f"# --- stage {stage.index} ({stage.name})\n" + OmegaConf.to_yaml(stage.cfg, resolve=True))
    except Exception as err:  # noqa: BLE001
        parts.append(f"# plan error: {type(err).__name__}: {err}\n")
    return "".join(parts)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in [None, *group_options("experiment")]:
        for mode in (None, "tiny", "overfit"):
            overrides = ([f"+experiment={name}"] if name else []) + ([f"debug={mode}"] if mode else [])
            (out / f"{name or '_root'}{f'.{mode}' if mode else ''}.yaml").write_text(snapshot(overrides))
            print(" ".join(overrides) or "(no overrides)")
    for name in group_options("hparams_search"):
        (out / f"_hparams_search.{name}.yaml").write_text(snapshot([f"hparams_search={name}"]))
    for root in ("serve", "record"):  # the other command-line roots (python -m meeple.serve / bc.record)
        (out / f"_{root}.yaml").write_text(snapshot([], config_name=root))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/compose_snapshot.py OUT_DIR")
    main(Path(sys.argv[1]))
