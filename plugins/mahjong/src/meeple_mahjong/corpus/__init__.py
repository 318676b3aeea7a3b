"""MJAI game logs -> a training corpus: scan (SQLite manifest, hold-out, player filters), build
(compressed shards), load (shuffled, suit-permuted, resumable batches). docs/mahjong_corpus.md."""
