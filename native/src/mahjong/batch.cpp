#include "batch.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "encode.hpp"

namespace meeple::mj {

BatchSim::BatchSim(BatchConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.num_tables < 1) throw std::invalid_argument("num_tables must be >= 1, got " + std::to_string(cfg_.num_tables));
  if (cfg_.learner_seats.empty() || cfg_.learner_seats.size() > 4)
    throw std::invalid_argument("learner_seats must name 1 to 4 seats");
  for (size_t i = 0; i < cfg_.learner_seats.size(); ++i) {
    const int s = cfg_.learner_seats[i];
    if (s < 0 || s > 3) throw std::invalid_argument("learner seat " + std::to_string(s) + " not in 0..3");
    if (slot_of_seat_[s] >= 0) throw std::invalid_argument("learner seat " + std::to_string(s) + " given twice");
    slot_of_seat_[s] = static_cast<int>(i);
  }
  if (cfg_.threads < 1) throw std::invalid_argument("threads must be >= 1, got " + std::to_string(cfg_.threads));
  if (explicit_games() && cfg_.games.size() != static_cast<size_t>(cfg_.num_tables))
    throw std::invalid_argument("games: one per table (" + std::to_string(cfg_.num_tables) + "), got " +
                                std::to_string(cfg_.games.size()));
  tables_.reserve(cfg_.num_tables);
  for (int t = 0; t < cfg_.num_tables; ++t) {
    tables_.push_back(Table{Game(cfg_.rules)});
    tables_.back().game.set_record_events(false);
    tables_.back().finished = true;  // nothing to step before the first reset
  }
  const size_t slots = static_cast<size_t>(num_slots());
  active_.assign(slots, 0);
  legal_.resize(slots);
  lookup_.resize(slots);
  const int extra = std::min(cfg_.threads, cfg_.num_tables) - 1;  // the caller's thread works too
  for (int i = 0; i < extra; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

BatchSim::~BatchSim() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_job_.notify_all();
  for (auto& w : workers_) w.join();
}

uint64_t BatchSim::games_finished() const {
  uint64_t n = 0;
  for (const Table& t : tables_) n += t.games_finished;
  return n;
}

uint64_t BatchSim::decisions() const {
  uint64_t n = 0;
  for (const Table& t : tables_) n += t.decisions;
  return n;
}

BotMatch BatchSim::table_stats(int t) const {
  const Table& tb = tables_.at(t);
  return tb.tally.result(tb.game);
}

void BatchSim::start_game(int t) {
  Table& tb = tables_[t];
  if (explicit_games()) {
    const GameSpec& spec = cfg_.games[t];
    ++tb.games_started;
    tb.game_index = spec.game_index;
    tb.game.reset(spec.session_seed, spec.game_index);
    for (int s = 0; s < 4; ++s) tb.rng[s] = SplitMix64(seat_stream_seed(spec.policy_seed, s));  // as play_bots
  } else {
    tb.game_index = (static_cast<uint64_t>(t) << 32) | tb.games_started++;
    tb.game.reset(cfg_.session_seed, tb.game_index);
    // Bot streams keyed by seat (not by player), so rotating players replays the same games.
    for (int s = 0; s < 4; ++s)
      tb.rng[s] = SplitMix64(hand_key(cfg_.session_seed ^ 0xB0B5EEDull, tb.game_index, 0x100u + s, 0));
  }
  tb.tally = MatchTally{};
  tb.last_score = tb.game.scores();
  tb.finished = false;
  advance(t);
}

void BatchSim::advance(int t) {
  Table& tb = tables_[t];
  Game& g = tb.game;
  while (!g.is_done()) {
    int bot_seat = -1;
    for (int s : g.pending())
      if (slot_of_seat_[s] < 0) {
        bot_seat = s;
        break;
      }
    if (bot_seat < 0) return;  // only learner seats are to act
    apply(tb, bot_seat, bot_action(cfg_.bots[bot_seat], g, bot_seat, tb.rng[bot_seat]));
  }
}

void BatchSim::apply(Table& tb, int seat, const Action& a) {
  tb.tally.step(tb.game, seat, a);
  ++tb.decisions;
}

void BatchSim::write(int t, const BatchOut& out, bool ended) {
  Table& tb = tables_[t];
  const Game& g = tb.game;
  const int L = static_cast<int>(cfg_.learner_seats.size());
  const std::array<int, 4>& scores = g.scores();
  const std::array<int, 4> rank_of = ended ? placements(scores) : std::array<int, 4>{-1, -1, -1, -1};
  const std::vector<int> pending = ended ? std::vector<int>{} : g.pending();
  for (int i = 0; i < L; ++i) {
    const int seat = cfg_.learner_seats[i];
    const size_t slot = static_cast<size_t>(t) * L + i;
    uint8_t* mask = out.mask + slot * kNumActions;
    const bool act = std::find(pending.begin(), pending.end(), seat) != pending.end();
    active_[slot] = act;
    if (act) {
      legal_mask(g, seat, legal_[slot].data(), lookup_[slot].data());
      std::copy(legal_[slot].begin(), legal_[slot].end(), mask);
    } else {
      legal_[slot].fill(0);
      std::fill(mask, mask + kNumActions, uint8_t{0});
      mask[kPassAction] = 1;  // the no-op of a seat that need not act
    }
    encode_public(g, seat, out.obs + slot * kPublicPlanes * kPlaneWidth);
    if (out.oracle) encode_oracle(g, seat, out.oracle + slot * kOraclePlanes * kPlaneWidth);
    if (out.active) out.active[slot] = act;
    if (out.reward) {
      float r = static_cast<float>((scores[seat] - tb.last_score[seat]) * cfg_.score_scale);
      if (ended) r += cfg_.rank_reward[rank_of[seat]];
      out.reward[slot] = r;
    }
    if (out.done) out.done[slot] = ended;
    if (out.rank) out.rank[slot] = static_cast<int8_t>(rank_of[seat]);
    if (out.score) out.score[slot] = scores[seat];
  }
  tb.last_score = scores;
}

void BatchSim::reset(const uint8_t* reset, const BatchOut& out) {
  if (!out.obs || !out.mask) throw std::invalid_argument("reset: obs and mask outputs are required");
  if (explicit_games())
    for (int t = 0; t < cfg_.num_tables; ++t)
      if ((!reset || reset[t]) && tables_[t].games_started)
        throw std::invalid_argument("table " + std::to_string(t) + " has played its explicit game: it cannot be reset");
  parallel([&](int t) {
    const bool restart = !reset || reset[t];
    if (restart) start_game(t);
    // Tables not reset are rewritten unchanged, so every slot is valid.
    write(t, out, !restart && tables_[t].finished);
    if (out.reward) {  // a reset carries no reward
      const int L = static_cast<int>(cfg_.learner_seats.size());
      for (int i = 0; i < L; ++i) out.reward[static_cast<size_t>(t) * L + i] = 0.0f;
    }
  });
}

void BatchSim::step(const int64_t* actions, const BatchOut& out, const uint8_t* tables) {
  if (!out.obs || !out.mask) throw std::invalid_argument("step: obs and mask outputs are required");
  const int L = static_cast<int>(cfg_.learner_seats.size());
  // Check everything before touching any table, so a bad action changes nothing.
  for (int t = 0; t < cfg_.num_tables; ++t) {
    if (tables && !tables[t]) continue;  // held
    if (tables_[t].finished) {
      if (explicit_games() && tables_[t].games_started) continue;  // its game is over: skipped
      throw std::invalid_argument("table " + std::to_string(t) + " has no game in progress: reset it first");
    }
    for (int i = 0; i < L; ++i) {
      const size_t slot = static_cast<size_t>(t) * L + i;
      if (!active_[slot]) continue;
      const int64_t a = actions[slot];
      if (a < 0 || a >= kNumActions || !legal_[slot][a]) {
        std::string legal;
        for (int k = 0; k < kNumActions; ++k)
          if (legal_[slot][k]) legal += (legal.empty() ? "" : ", ") + std::to_string(k);
        throw std::invalid_argument("slot " + std::to_string(slot) + " (table " + std::to_string(t) + ", seat " +
                                    std::to_string(cfg_.learner_seats[i]) + "): action " + std::to_string(a) +
                                    " is not legal; legal indices: [" + legal + "]");
      }
    }
  }
  parallel([&](int t) {
    Table& tb = tables_[t];
    if (tables && !tables[t]) {  // held: its rows keep what the caller's arrays hold
      for (int i = 0; i < L; ++i) {
        const size_t slot = static_cast<size_t>(t) * L + i;
        if (out.reward) out.reward[slot] = 0.0f;
        if (out.done) out.done[slot] = 0;
      }
      return;
    }
    if (tb.finished) {  // an explicit game already over: rows rewritten, inactive
      write(t, out, false);
      return;
    }
    for (int i = 0; i < L; ++i) {
      const size_t slot = static_cast<size_t>(t) * L + i;
      if (!active_[slot]) continue;
      apply(tb, cfg_.learner_seats[i], lookup_[slot][actions[slot]]);
    }
    advance(t);
    const bool ended = tb.game.is_done();
    if (ended) tb.finished = true, ++tb.games_finished;
    write(t, out, ended);
  });
}

void BatchSim::copy_tables(const BatchSim& src, const int32_t* src_tables, const BatchOut& out) {
  if (!out.obs || !out.mask) throw std::invalid_argument("copy_tables: obs and mask outputs are required");
  if (explicit_games()) throw std::invalid_argument("copy_tables: a simulator of explicit games takes no copies");
  const BatchConfig& o = src.cfg_;
  if (o.learner_seats != cfg_.learner_seats || o.bots != cfg_.bots || o.score_scale != cfg_.score_scale ||
      o.rank_reward != cfg_.rank_reward)
    throw std::invalid_argument("copy_tables: the source simulator has other learner seats, bots or rewards");
  for (int t = 0; t < cfg_.num_tables; ++t)
    if (src_tables[t] >= src.num_tables())
      throw std::invalid_argument("copy_tables: source table " + std::to_string(src_tables[t]) + " of table " +
                                  std::to_string(t) + " is not in [0, " + std::to_string(src.num_tables()) + ")");
  const int L = static_cast<int>(cfg_.learner_seats.size());
  for (int t = 0; t < cfg_.num_tables; ++t) {
    Table& tb = tables_[t];
    if (src_tables[t] >= 0) {
      // The source's last write left last_score at the current scores, so the copy's first
      // reward counts from the branch point; a finished game has no pending seat to activate.
      tb = src.tables_[src_tables[t]];
      write(t, out, false);
      continue;
    }
    tb.finished = true;
    for (int i = 0; i < L; ++i) {  // idle: inactive slots that may only pass
      const size_t slot = static_cast<size_t>(t) * L + i;
      active_[slot] = 0;
      legal_[slot].fill(0);
      uint8_t* mask = out.mask + slot * kNumActions;
      std::fill(mask, mask + kNumActions, uint8_t{0});
      mask[kPassAction] = 1;
      std::fill(out.obs + slot * kPublicPlanes * kPlaneWidth, out.obs + (slot + 1) * kPublicPlanes * kPlaneWidth, 0.0f);
      if (out.oracle)
        std::fill(out.oracle + slot * kOraclePlanes * kPlaneWidth, out.oracle + (slot + 1) * kOraclePlanes * kPlaneWidth, 0.0f);
      if (out.active) out.active[slot] = 0;
      if (out.reward) out.reward[slot] = 0.0f;
      if (out.done) out.done[slot] = 0;
      if (out.rank) out.rank[slot] = -1;
      if (out.score) out.score[slot] = 0;
    }
  }
  if (out.reward)  // a copy carries no reward of its own
    for (int s = 0; s < num_slots(); ++s) out.reward[s] = 0.0f;
}

void BatchSim::redeal(const uint8_t* tables, const uint64_t* seeds) {
  for (int t = 0; t < cfg_.num_tables; ++t)
    if (tables[t]) tables_[t].game.redeal_wall(seeds[t]);
}

void BatchSim::parallel(const std::function<void(int)>& per_table) {
  if (workers_.empty()) {
    for (int t = 0; t < cfg_.num_tables; ++t) per_table(t);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &per_table;
    next_table_.store(0);
    busy_ = static_cast<int>(workers_.size());
    errors_.clear();
    ++generation_;
  }
  cv_job_.notify_all();
  std::exception_ptr mine;
  for (int t; (t = next_table_.fetch_add(1)) < cfg_.num_tables;) {
    try {
      per_table(t);
    } catch (...) {
      if (!mine) mine = std::current_exception();
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [&] { return busy_ == 0; });
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (!errors_.empty()) std::rethrow_exception(errors_.front());
}

void BatchSim::worker_loop(int) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_job_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr err;
    for (int t; (t = next_table_.fetch_add(1)) < cfg_.num_tables;) {
      try {
        (*job)(t);
      } catch (...) {
        if (!err) err = std::current_exception();
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (err) errors_.push_back(err);
    if (--busy_ == 0) cv_done_.notify_one();
  }
}

}  // namespace meeple::mj
