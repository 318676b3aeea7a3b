"""Command-line parsers whose mistakes are one line: ``PROG: error: what is wrong`` and exit
code 2, as every other mistake of the project's commands (argparse would print its whole
usage block first, a dozen lines for a command with many options)."""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (--help lists the options)\n")
