"""Mahjong training corpora built from MJAI logs (docs/mahjong_corpus.md).

`samples`: every decision of a log replayed through the engine (`log_games`), `tenhou`: Tenhou
JSON logs to MJAI; `manifest`: scan logs into a SQLite manifest (hold-out, player filters),
`shards`: pack kept samples into compressed shards, `loader`: shuffled, suit-permuted,
resumable batches, `datamodule`: the Lightning side.
"""

from .samples import SAMPLE_FIELDS, GameSamples, LogProblem, log_games

__all__ = ["SAMPLE_FIELDS", "GameSamples", "LogProblem", "log_games"]
