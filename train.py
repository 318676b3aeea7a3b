"""Train an agent: python train.py [+experiment=<recipe>] [group=option] [key=value]..."""

import hydra
from omegaconf import DictConfig

from meeple.cli.compose_errors import one_line_config_errors
from meeple.cli.train import main as train_main


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    return train_main(cfg)


if __name__ == "__main__":
    with one_line_config_errors():  # an unknown option or a malformed override: one line, exit 2
        main()
