// Python bindings of the built-in bots (bots.hpp) into meeple_native.mahjong.
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind_parts.hpp"
#include "bots.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace meeple::mj {

namespace {

std::array<Bot, 4> parse_bots(const std::vector<std::string>& names) {
  if (names.size() != 4)
    throw nb::value_error(("play_bots: bots must name 4 bots (one per seat), got " + std::to_string(names.size())).c_str());
  std::array<Bot, 4> bots{};
  for (int s = 0; s < 4; ++s) {
    try {
      bots[s] = bot_from_name(names[s]);
    } catch (const std::invalid_argument& e) {
      throw nb::value_error(e.what());
    }
  }
  return bots;
}

}  // namespace

// play_bots' dict: per-seat lists (scores, ranks, wins, ...) and hands (also BatchSim.table_stats).
nb::dict match_to_dict(const BotMatch& m) {
  nb::dict d;
  d["hands"] = m.hands;
  auto col = [&](auto field) {
    std::vector<int> v;
    for (const SeatStats& s : m.seats) v.push_back(s.*field);
    return v;
  };
  d["scores"] = col(&SeatStats::score);
  d["ranks"] = col(&SeatStats::rank);
  d["wins"] = col(&SeatStats::wins);
  d["tsumo"] = col(&SeatStats::tsumo);
  d["deal_ins"] = col(&SeatStats::deal_ins);
  d["riichi"] = col(&SeatStats::riichi);
  d["calls"] = col(&SeatStats::calls);
  d["decisions"] = col(&SeatStats::decisions);
  return d;
}

void register_bots(nb::module_& m) {
  m.def("bot_names", [] { return std::vector<std::string>{"random", "rule", "rule-nofold"}; },
        "Names accepted wherever a built-in bot is named.");
  m.def(
      "bot_action",
      [](const Game& g, int seat, const std::string& bot, uint64_t seed) {
        Bot b;
        try {
          b = bot_from_name(bot);
        } catch (const std::invalid_argument& e) {
          throw nb::value_error(e.what());
        }
        if (g.is_done()) throw nb::value_error("bot_action: the game is over");
        SplitMix64 rng(seed);
        nb::gil_scoped_release release;
        return bot_action(b, g, seat, rng);
      },
      "game"_a, "seat"_a, "bot"_a = "rule", "seed"_a = 0,
      "The built-in bot's action for `seat` now (random stream seeded with `seed`).");
  m.def(
      "play_bots",
      [](Game& g, const std::vector<std::string>& bots, uint64_t policy_seed) {
        const std::array<Bot, 4> b = parse_bots(bots);
        BotMatch out;
        {
          nb::gil_scoped_release release;
          out = play_bots(g, b, policy_seed);
        }
        return match_to_dict(out);
      },
      "game"_a, "bots"_a, "policy_seed"_a,
      "Play `game` (already reset) to the end with bots[s] in seat s; seat s draws its randomness\n"
      "from a stream seeded by (policy_seed, s). Returns per-seat lists: scores, ranks (1-4, ties\n"
      "to the lower seat), wins, tsumo, deal_ins (rons paid), riichi, calls (open melds), decisions;\n"
      "and hands (hands played).");
  m.def("seat_stream_seed", &seat_stream_seed, "policy_seed"_a, "seat"_a,
        "Seed of seat `seat`'s bot stream in play_bots.");
}

}  // namespace meeple::mj
