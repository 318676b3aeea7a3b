// Bindings of the action space and the batch simulator (meeple_native.mahjong).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <optional>
#include <string>

#include "actions.hpp"
#include "batch.hpp"
#include "bind_parts.hpp"
#include "encode.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace meeple::mj {
namespace {

template <typename T>
using Array = nb::ndarray<T, nb::c_contig, nb::device::cpu>;

// Checks a caller array's shape; the message names the array, what came and what fits.
template <typename T>
T* checked(const char* name, Array<T>& a, std::initializer_list<size_t> shape, const char* dtype) {
  bool ok = a.ndim() == shape.size();
  size_t i = 0;
  for (size_t n : shape) ok = ok && a.shape(i++) == n;
  if (!ok) {
    std::string want, got;
    for (size_t n : shape) want += (want.empty() ? "" : ", ") + std::to_string(n);
    for (size_t k = 0; k < a.ndim(); ++k) got += (got.empty() ? "" : ", ") + std::to_string(a.shape(k));
    throw nb::value_error((std::string(name) + ": expected a C-contiguous " + dtype + " CPU array of shape (" + want +
                           "), got shape (" + got + ")")
                              .c_str());
  }
  return a.data();
}

Bot bot_named(const std::string& name) {
  try {
    return bot_from_name(name);
  } catch (const std::invalid_argument& e) {
    throw nb::value_error(e.what());
  }
}

template <typename T>
T* optional_out(const char* name, std::optional<Array<T>>& a, size_t slots, const char* dtype) {
  return a ? checked(name, *a, {slots}, dtype) : nullptr;
}


// The caller's output arrays of reset/step, checked against the simulator's slot count.
BatchOut outputs(const BatchSim& b, Array<float>& obs, Array<uint8_t>& mask, std::optional<Array<uint8_t>>& active,
                 std::optional<Array<float>>& reward, std::optional<Array<uint8_t>>& done,
                 std::optional<Array<int8_t>>& rank, std::optional<Array<int32_t>>& score,
                 std::optional<Array<float>>& oracle) {
  const size_t n = b.num_slots();
  BatchOut out;
  out.obs = checked("obs", obs, {n, size_t{kPublicPlanes}, size_t{kPlaneWidth}}, "float32");
  out.mask = checked("mask", mask, {n, size_t{kNumActions}}, "uint8/bool");
  out.active = optional_out("active", active, n, "uint8/bool");
  out.reward = optional_out("reward", reward, n, "float32");
  out.done = optional_out("done", done, n, "uint8/bool");
  out.rank = optional_out("rank", rank, n, "int8");
  out.score = optional_out("score", score, n, "int32");
  if (oracle) out.oracle = checked("oracle", *oracle, {n, size_t{kOraclePlanes}, size_t{kPlaneWidth}}, "float32");
  return out;
}

}  // namespace

void register_batch(nb::module_& m) {
  m.attr("NUM_ACTIONS") = kNumActions;
  m.attr("PASS_ACTION") = kPassAction;
  m.def("action_index", [](const Action& a, bool red_fives) { return action_index(a, red_fives); }, "action"_a,
        "red_fives"_a = true, "Index of an engine action in the fixed 155-action space (docs/mahjong_encoding.md).");
  m.def(
      "legal_mask",
      [](const Game& g, int seat) {
        if (seat < 0 || seat > 3) throw nb::value_error(("seat must be in 0..3, got " + std::to_string(seat)).c_str());
        auto* mask = new uint8_t[kNumActions];
        nb::capsule owner(mask, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
        legal_mask(g, seat, mask);
        return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(mask, {static_cast<size_t>(kNumActions)}, owner);
      },
      "game"_a, "seat"_a, "The seat's legal actions now as a uint8 mask over the 155 action indices.");
  m.def(
      "action_from_index",
      [](const Game& g, int seat, int index) {
        if (index < 0 || index >= kNumActions)
          throw nb::value_error(("action index must be in [0, 155), got " + std::to_string(index)).c_str());
        std::array<uint8_t, kNumActions> mask;
        std::array<Action, kNumActions> lookup;
        legal_mask(g, seat, mask.data(), lookup.data());
        if (!mask[index]) throw nb::value_error(("action index " + std::to_string(index) + " is not legal for seat " +
                                                 std::to_string(seat) + " now")
                                                    .c_str());
        return lookup[index];
      },
      "game"_a, "seat"_a, "index"_a, "The engine action of a legal action index.");

  nb::class_<BatchSim>(m, "BatchSim",
                       "B tables stepped together: learner seats act from Python, the other seats are native bots.\n"
                       "See docs/mahjong_env.md.")
      .def(
          "__init__",
          [](BatchSim* self, int num_tables, const Game& rules, uint64_t session_seed, std::vector<int> learner_seats,
             std::vector<std::string> bots, int threads, double score_scale, std::array<float, 4> rank_reward,
             std::optional<std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>> games) {
            BatchConfig cfg;
            cfg.num_tables = num_tables, cfg.rules = rules.rules(), cfg.session_seed = session_seed;
            cfg.learner_seats = std::move(learner_seats), cfg.threads = threads;
            cfg.score_scale = score_scale, cfg.rank_reward = rank_reward;
            if (bots.size() != 4)
              throw nb::value_error(("bots: one name per seat (4, learner seats' ignored), got " +
                                     std::to_string(bots.size()))
                                        .c_str());
            for (int s = 0; s < 4; ++s) cfg.bots[s] = bot_from_name(bots[s]);
            if (games) {
              if (games->empty())
                throw nb::value_error("games: give at least one (session_seed, game_index, policy_seed)");
              for (const auto& [seed, index, policy] : *games) cfg.games.push_back(GameSpec{seed, index, policy});
            }
            new (self) BatchSim(std::move(cfg));
          },
          "num_tables"_a, "rules"_a, nb::kw_only(), "session_seed"_a = 0, "learner_seats"_a = std::vector<int>{0},
          "bots"_a = std::vector<std::string>{"rule", "rule", "rule", "rule"}, "threads"_a = 1,
          "score_scale"_a = 1e-4, "rank_reward"_a = std::array<float, 4>{0.9f, 0.45f, 0.0f, -1.35f},
          "games"_a = nb::none(),
          "`rules` is a Game whose rule options every table uses. `games`: explicit games, one\n"
          "(session_seed, game_index, policy_seed) per table, each played once with bot seat s on\n"
          "seat_stream_seed(policy_seed, s) as in play_bots (session_seed is then unused).")
      .def_prop_ro("num_tables", &BatchSim::num_tables)
      .def_prop_ro("num_slots", &BatchSim::num_slots)
      .def_prop_ro("learner_seats", [](const BatchSim& b) { return b.config().learner_seats; })
      .def_prop_ro("games_finished", &BatchSim::games_finished)
      .def_prop_ro("decisions", &BatchSim::decisions)
      .def("game", [](const BatchSim& b, int t) { return Game(b.game(t)); }, "table"_a,
           "A copy of a table's game (for inspection).")
      .def(
          "table_stats", [](const BatchSim& b, int t) { return match_to_dict(b.table_stats(t)); }, "table"_a,
          "The table's game so far as play_bots reports a game: per-seat lists scores, ranks (1-4, ties\n"
          "to the lower seat), wins, tsumo, deal_ins, riichi, calls, decisions; and hands.")
      .def("finished", &BatchSim::finished, "table"_a, "Whether the table's game is over (or not started).")
      .def(
          "reset",
          [](BatchSim& b, std::optional<Array<const uint8_t>> reset, Array<float> obs, Array<uint8_t> mask,
             std::optional<Array<uint8_t>> active, std::optional<Array<float>> reward,
             std::optional<Array<uint8_t>> done, std::optional<Array<int8_t>> rank, std::optional<Array<int32_t>> score,
             std::optional<Array<float>> oracle) {
            const uint8_t* r = reset ? checked("reset", *reset, {static_cast<size_t>(b.num_tables())}, "uint8/bool") : nullptr;
            const BatchOut out = outputs(b, obs, mask, active, reward, done, rank, score, oracle);
            nb::gil_scoped_release release;
            b.reset(r, out);
          },
          // Outputs are never converted: writes into a converted copy would be lost.
          "reset"_a.none(), "obs"_a.noconvert(), "mask"_a.noconvert(), nb::kw_only(),
          "active"_a.noconvert() = nb::none(), "reward"_a.noconvert() = nb::none(),
          "done"_a.noconvert() = nb::none(), "rank"_a.noconvert() = nb::none(),
          "score"_a.noconvert() = nb::none(), "oracle"_a.noconvert() = nb::none(),
          "Start the next game at the tables where reset[t] (all if None); write every slot into the arrays.")
      .def(
          "step",
          [](BatchSim& b, Array<const int64_t> actions, Array<float> obs, Array<uint8_t> mask,
             std::optional<Array<uint8_t>> active, std::optional<Array<float>> reward,
             std::optional<Array<uint8_t>> done, std::optional<Array<int8_t>> rank, std::optional<Array<int32_t>> score,
             std::optional<Array<float>> oracle, std::optional<Array<const uint8_t>> tables) {
            const int64_t* a = checked("actions", actions, {static_cast<size_t>(b.num_slots())}, "int64");
            const BatchOut out = outputs(b, obs, mask, active, reward, done, rank, score, oracle);
            const uint8_t* held =
                tables ? checked("tables", *tables, {static_cast<size_t>(b.num_tables())}, "uint8/bool") : nullptr;
            nb::gil_scoped_release release;
            b.step(a, out, held);
          },
          "actions"_a, "obs"_a.noconvert(), "mask"_a.noconvert(), nb::kw_only(),
          "active"_a.noconvert() = nb::none(), "reward"_a.noconvert() = nb::none(),
          "done"_a.noconvert() = nb::none(), "rank"_a.noconvert() = nb::none(),
          "score"_a.noconvert() = nb::none(), "oracle"_a.noconvert() = nb::none(), "tables"_a.none() = nb::none(),
          "Play actions[slot] at every active slot, advance every table to its next learner decision, write\n"
          "every slot. `tables` (uint8/bool [num_tables], None = all): only tables with tables[t] step; the\n"
          "others are held: their rows are left as the arrays hold them (pass the last call's arrays), but\n"
          "reward 0 and done 0. The GIL is released while tables step on the thread pool.")
      .def(
          "copy_tables",
          [](BatchSim& b, const BatchSim& src, Array<const int32_t> src_tables, Array<float> obs, Array<uint8_t> mask,
             std::optional<Array<uint8_t>> active, std::optional<Array<float>> reward,
             std::optional<Array<uint8_t>> done, std::optional<Array<int8_t>> rank, std::optional<Array<int32_t>> score,
             std::optional<Array<float>> oracle) {
            const int32_t* s =
                checked("src_tables", src_tables, {static_cast<size_t>(b.num_tables())}, "int32");
            const BatchOut out = outputs(b, obs, mask, active, reward, done, rank, score, oracle);
            try {
              b.copy_tables(src, s, out);
            } catch (const std::invalid_argument& e) {
              throw nb::value_error(e.what());
            }
          },
          "src"_a, "src_tables"_a.noconvert(), "obs"_a.noconvert(), "mask"_a.noconvert(), nb::kw_only(),
          "active"_a.noconvert() = nb::none(), "reward"_a.noconvert() = nb::none(),
          "done"_a.noconvert() = nb::none(), "rank"_a.noconvert() = nb::none(),
          "score"_a.noconvert() = nb::none(), "oracle"_a.noconvert() = nb::none(),
          "Table t becomes an exact copy of src's table src_tables[t] (int32 [num_tables]; < 0: idle,\n"
          "its slots inactive), so stepping it plays on exactly as src would: the same walls, bot\n"
          "streams and score baseline. src needs the same learner seats, bots and rewards. Writes every\n"
          "slot (reward 0).")
      .def(
          "redeal",
          [](BatchSim& b, Array<const uint8_t> tables, Array<const uint64_t> seeds) {
            const size_t n = static_cast<size_t>(b.num_tables());
            b.redeal(checked("tables", tables, {n}, "uint8"), checked("seeds", seeds, {n}, "uint64"));
          },
          "tables"_a.noconvert(), "seeds"_a.noconvert(),
          "Shuffle the tiles no seat has seen on each table t with tables[t] set (uint8 [num_tables]),\n"
          "with seeds[t] (uint64 [num_tables]): Game.redeal_wall. Every seat's view stays as it was.")
      .def(
          "hands_played",
          [](const BatchSim& b) {
            std::vector<int> n(b.num_tables());
            for (int t = 0; t < b.num_tables(); ++t) n[t] = b.hands_played(t);
            return n;
          },
          "Hands each table's current game has finished (a new game starts at 0).");

  // Python-side play that matches the native bots exactly (reference loops, mixed tables).
  nb::class_<SplitMix64>(m, "BotStream",
                         "A bot seat's random stream. BotStream(seat_stream_seed(policy_seed, s)).act(game, s, bot)\n"
                         "plays exactly what play_bots (and BatchSim with explicit games) plays at seat s.")
      .def(nb::init<uint64_t>(), "seed"_a)
      .def_prop_ro("state", [](const SplitMix64& r) { return r.state; })
      .def(
          "act",
          [](SplitMix64& rng, const Game& g, int seat, const std::string& bot) {
            const Bot b = bot_named(bot);
            if (seat < 0 || seat > 3)
              throw nb::value_error(("seat must be in 0..3, got " + std::to_string(seat)).c_str());
            const std::vector<int> pending = g.pending();
            if (std::find(pending.begin(), pending.end(), seat) == pending.end())
              throw nb::value_error(("BotStream.act: seat " + std::to_string(seat) + " has no decision now").c_str());
            return bot_action(b, g, seat, rng);
          },
          "game"_a, "seat"_a, "bot"_a, "The bot's action for `seat` now, drawing from this stream.");
}

}  // namespace meeple::mj
