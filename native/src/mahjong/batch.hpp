// Batch simulator: B mahjong tables stepped together for one learner.
//
// The learner controls `learner_seats` at every table; the other seats are built-in bots
// (bots.hpp) played natively between learner decisions. The learner's view is a flat
// array of slots, slot = table * L + i for learner seat learner_seats[i], so one network
// forward serves the decisions of several seats of several tables. After a step every
// table has advanced to its next learner decision (or to the end of its game): slots whose
// seat must act are `active`; the others get a mask allowing only kPassAction, a no-op the
// learner's policy takes with probability one.
//
// Determinism: table t plays games t<<32 | j (j = 0, 1, ... its games so far); walls come
// from (session seed, game index) as everywhere, and each bot seat draws from its own
// SplitMix64 stream keyed by (session seed, game index, seat). A table's play is
// therefore a function of the seeds and the learner's actions only: the thread count and
// the number of tables do not change it.
//
// Explicit games (duplicate evaluation, docs/mahjong_bots.md): with `games` set, table t
// plays exactly games[t] once: walls from (its session seed, its game index) and bot seat
// s on the stream seat_stream_seed(its policy seed, s), as play_bots would, so a learned
// policy and the bots meet on the very games of a bot-only duplicate. A table whose game
// is over stays finished: step skips it (its slots inactive) and reset refuses it.
// Every table counts per-seat stats for both modes (table_stats, counted as play_bots does).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "actions.hpp"
#include "bots.hpp"
#include "game.hpp"
#include "wall.hpp"

namespace meeple::mj {

// One explicit game: walls from (session_seed, game_index), bot streams from policy_seed.
struct GameSpec {
  uint64_t session_seed = 0, game_index = 0, policy_seed = 0;
};

struct BatchConfig {
  int num_tables = 1;
  GameRules rules;
  uint64_t session_seed = 0;
  std::vector<int> learner_seats{0};
  std::array<Bot, 4> bots{Bot::Rule, Bot::Rule, Bot::Rule, Bot::Rule};  // used at non-learner seats
  int threads = 1;
  double score_scale = 1e-4;                       // reward per point of score change
  std::array<float, 4> rank_reward{0.9f, 0.45f, 0.0f, -1.35f};  // added at the game's end, by rank
  std::vector<GameSpec> games;  // explicit games: table t plays games[t] once (size num_tables)
};

// Caller-provided outputs, one row per slot (any may be null except obs/mask where noted).
struct BatchOut {
  float* obs = nullptr;       // [slots, kPublicPlanes, 34] (required)
  float* oracle = nullptr;    // [slots, kOraclePlanes, 34] or null
  uint8_t* mask = nullptr;    // [slots, kNumActions] (required)
  uint8_t* active = nullptr;  // [slots]
  float* reward = nullptr;    // [slots]
  uint8_t* done = nullptr;    // [slots]: the table's game ended in this call
  int8_t* rank = nullptr;     // [slots]: 0-3 final rank where done, else -1
  int32_t* score = nullptr;   // [slots]: the seat's current score
};

class BatchSim {
 public:
  explicit BatchSim(BatchConfig cfg);
  ~BatchSim();
  BatchSim(const BatchSim&) = delete;
  BatchSim& operator=(const BatchSim&) = delete;

  int num_tables() const { return cfg_.num_tables; }
  int num_slots() const { return cfg_.num_tables * static_cast<int>(cfg_.learner_seats.size()); }
  const BatchConfig& config() const { return cfg_; }

  // Starts the next game at every table with reset[t] != 0 (all tables if `reset` is
  // null), plays bots up to the first learner decision and writes those tables' slots.
  void reset(const uint8_t* reset, const BatchOut& out);
  // Plays actions[slot] for every active slot (others are ignored), advances every table
  // to its next learner decision and writes every slot. A table whose game ends is done
  // and stays at its final state until reset. Throws std::invalid_argument, with nothing
  // applied, if an active slot's action is not legal or a finished table is stepped
  // (with explicit games a finished table is skipped instead: its slots stay inactive).
  // `tables` (null = all) holds every table with tables[t] == 0: nothing is checked,
  // applied or advanced there, its rows are not written (pass the arrays of the previous
  // call to keep them valid) except reward 0 and done 0, so a caller can advance some
  // tables alone (e.g. seats played by other networks) and resume the others later as if
  // never held.
  void step(const int64_t* actions, const BatchOut& out, const uint8_t* tables = nullptr);
  // Branching (docs/mahjong_env.md, meeple_mahjong.branch): table t becomes an exact copy of
  // src's table src_tables[t] (its game, bot streams, score baseline and tallies), so stepping
  // it replays what src would play from there; src_tables[t] < 0 leaves table t idle (finished,
  // its slots inactive). Every slot is written. `src` must have this simulator's learner
  // seats, bots and reward settings, and this one must not play explicit games; anything else
  // throws std::invalid_argument with nothing copied.
  void copy_tables(const BatchSim& src, const int32_t* src_tables, const BatchOut& out);
  int hands_played(int table) const { return tables_.at(table).game.hands_played(); }
  // Game::redeal_wall on table t with seeds[t], for each t whose tables[t] is set.
  void redeal(const uint8_t* tables, const uint64_t* seeds);

  const Game& game(int table) const { return tables_.at(table).game; }
  // The table's current (or last) game so far, per seat as play_bots reports it: score,
  // rank (1-4, ties to the lower seat), wins, tsumo, deal-ins, riichi, calls, decisions.
  BotMatch table_stats(int table) const;
  bool finished(int table) const { return tables_.at(table).finished; }
  uint64_t games_finished() const;
  uint64_t decisions() const;  // learner and bot decisions so far

 private:
  struct Table {
    Game game;
    uint64_t games_started = 0, game_index = 0;
    std::array<SplitMix64, 4> rng{SplitMix64(0), SplitMix64(0), SplitMix64(0), SplitMix64(0)};
    std::array<int, 4> last_score{};
    MatchTally tally;  // per-seat counts of the current game, as play_bots keeps them
    bool finished = false;
    uint64_t games_finished = 0, decisions = 0;
  };

  void start_game(int t);
  void advance(int t);  // bots act until a learner seat is pending or the game ends
  void apply(Table& tb, int seat, const Action& a);  // one decision, counted in the stats
  bool explicit_games() const { return !cfg_.games.empty(); }
  void write(int t, const BatchOut& out, bool ended);
  void parallel(const std::function<void(int)>& per_table);
  void worker_loop(int id);

  BatchConfig cfg_;
  std::array<int, 4> slot_of_seat_{-1, -1, -1, -1};  // index into learner_seats, -1 = bot
  std::vector<Table> tables_;
  // Per slot, from the last write: whether its seat must act, its legal indices and
  // the engine action of each.
  std::vector<uint8_t> active_;
  std::vector<std::array<uint8_t, kNumActions>> legal_;
  std::vector<std::array<Action, kNumActions>> lookup_;

  // Thread pool: workers take tables from a shared counter for each job.
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_job_, cv_done_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
  std::atomic<int> next_table_{0};
  std::vector<std::exception_ptr> errors_;
};

}  // namespace meeple::mj
