"""Mahjong training corpora built from MJAI logs (docs/mahjong_corpus.md).

`samples`: every decision of a log replayed through the engine (`log_games`), `tenhou`: Tenhou
JSON logs to MJAI.
"""

from .samples import SAMPLE_FIELDS, GameSamples, LogProblem, log_games

__all__ = ["SAMPLE_FIELDS", "GameSamples", "LogProblem", "log_games"]
