"""Train an agent: python train.py [+experiment=<recipe>] [group=option] [key=value]..."""

import hydra
from omegaconf import DictConfig

from meeple.cli.train import main as train_main


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    return train_main(cfg)


if __name__ == "__main__":
    main()
