// Python bindings of the mahjong engine -> meeple_native._core.mahjong (a submodule).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bind_parts.hpp"
#include "game.hpp"
#include "score.hpp"
#include "shanten.hpp"
#include "tiles.hpp"
#include "wall.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace meeple::mj {
namespace {

Counts to_counts(const std::vector<int>& counts) {
  if (counts.size() != kNumKinds) {
    throw nb::value_error(("shanten: expected 34 tile counts (1m..9m, 1p..9p, 1s..9s, E S W N P F C), got " +
                           std::to_string(counts.size()))
                              .c_str());
  }
  Counts c{};
  for (int k = 0; k < kNumKinds; ++k) {
    if (counts[k] < 0 || counts[k] > 4) {
      throw nb::value_error(("shanten: count of " + kind_to_mjai(k) + " is " + std::to_string(counts[k]) +
                             "; counts must be in 0..4")
                                .c_str());
    }
    c[k] = static_cast<uint8_t>(counts[k]);
  }
  return c;
}

template <typename F>
auto rethrow(F&& f) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    throw nb::value_error(e.what());
  }
}

MeldType parse_meld_type(const std::string& s) {
  if (s == "chi") return MeldType::Chi;
  if (s == "pon") return MeldType::Pon;
  if (s == "daiminkan") return MeldType::Daiminkan;
  if (s == "ankan") return MeldType::Ankan;
  if (s == "kakan") return MeldType::Kakan;
  throw nb::value_error(("unknown meld type '" + s + "': expected chi, pon, daiminkan, ankan or kakan").c_str());
}

nb::dict result_to_dict(const ScoreResult& r) {
  nb::dict d;
  d["ok"] = r.ok;
  d["error"] = r.error;
  d["han"] = r.han;
  d["fu"] = r.fu;
  d["yakuman"] = r.yakuman;
  nb::list yaku;
  for (auto [y, h] : r.yaku) yaku.append(nb::make_tuple(yaku_name(y), h));
  d["yaku"] = yaku;
  d["dora"] = r.dora;
  d["aka"] = r.aka;
  d["ura"] = r.ura;
  d["limit"] = r.limit;
  nb::dict pay;
  pay["main"] = r.pay.main;
  pay["main_bonus"] = r.pay.main_bonus;
  pay["additional"] = r.pay.additional;
  pay["additional_bonus"] = r.pay.additional_bonus;
  pay["kyoutaku_bonus"] = r.pay.kyoutaku_bonus;
  pay["total"] = r.pay.total;
  d["payment"] = pay;
  return d;
}

const char* meld_type_name(MeldType t) {
  static constexpr const char* kNames[] = {"chi", "pon", "daiminkan", "ankan", "kakan"};
  return kNames[static_cast<int>(t)];
}

nb::list melds_to_list(const std::vector<Meld>& melds) {
  nb::list l;
  for (const Meld& m : melds) l.append(nb::make_tuple(meld_type_name(m.type), m.tiles));
  return l;
}

nb::dict win_record_to_dict(const WinRecord& w) {
  const WinInput& in = w.input;
  nb::dict flags;
  flags["tsumo"] = in.tsumo, flags["riichi"] = in.riichi, flags["double_riichi"] = in.double_riichi;
  flags["ippatsu"] = in.ippatsu, flags["rinshan"] = in.rinshan, flags["chankan"] = in.chankan;
  flags["haitei"] = in.haitei, flags["houtei"] = in.houtei, flags["tenhou"] = in.tenhou;
  flags["chiihou"] = in.chiihou, flags["seat_wind"] = in.seat_wind, flags["round_wind"] = in.round_wind;
  flags["dora_indicators"] = in.dora_indicators, flags["ura_indicators"] = in.ura_indicators;
  flags["honba"] = in.honba, flags["riichi_sticks"] = in.riichi_sticks;
  nb::dict d;
  d["winner"] = w.winner;
  d["loser"] = w.loser;
  d["closed"] = in.closed;
  d["melds"] = melds_to_list(in.melds);
  d["win_tile"] = in.win_tile;
  d["flags"] = flags;
  d["result"] = result_to_dict(w.result);
  d["deltas"] = w.deltas;
  d["pao"] = w.pao;
  return d;
}

ActionType parse_action_type(const std::string& s) {
  for (int i = 0; i <= static_cast<int>(ActionType::Pass); ++i)
    if (s == action_type_name(static_cast<ActionType>(i))) return static_cast<ActionType>(i);
  throw nb::value_error(("unknown action type '" + s +
                         "': expected discard, riichi, tsumo, ron, chi, pon, daiminkan, ankan, kakan, kyuushu or pass")
                            .c_str());
}

GameRules make_rules(bool red_fives, bool open_tanyao, bool double_yakuman, bool kazoe_yakuman, bool kiriage,
                     bool east_only, int start_points, int return_points, bool agari_yame, bool bust_ends,
                     bool double_ron, bool triple_ron_abort, bool nagashi_mangan, bool kyuushu_kyuuhai,
                     bool suufon_renda, bool suucha_riichi, bool suukaikan, bool pao) {
  GameRules r;
  r.scoring.red_fives = red_fives, r.scoring.open_tanyao = open_tanyao, r.scoring.double_yakuman = double_yakuman;
  r.scoring.kazoe_yakuman = kazoe_yakuman, r.scoring.kiriage = kiriage;
  r.east_only = east_only, r.start_points = start_points, r.return_points = return_points;
  r.agari_yame = agari_yame, r.bust_ends = bust_ends, r.double_ron = double_ron;
  r.triple_ron_abort = triple_ron_abort, r.nagashi_mangan = nagashi_mangan, r.kyuushu_kyuuhai = kyuushu_kyuuhai;
  r.suufon_renda = suufon_renda, r.suucha_riichi = suucha_riichi, r.suukaikan = suukaikan;
  r.pao = pao;
  return r;
}

// Uniform random legal play until the game ends (native loop, no Python per decision).
uint64_t random_playout(Game& g, uint64_t policy_seed) {
  SplitMix64 rng(policy_seed);
  uint64_t decisions = 0;
  while (!g.is_done()) {
    const int seat = g.pending().front();
    const std::vector<Action> legal = g.legal_actions(seat);
    g.step(seat, legal[rng.below(static_cast<uint32_t>(legal.size()))]);
    ++decisions;
  }
  return decisions;
}

// A simple rule-based player: wins when it can, declares riichi, discards to lower shanten
// (random among the best), calls with probability `call_prob`. Wins far more often than
// uniform play, so self-play exercises scoring, riichi, furiten and kans.
uint64_t greedy_playout(Game& g, uint64_t policy_seed, double call_prob) {
  SplitMix64 rng(policy_seed);
  auto coin = [&](double p) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53 < p; };
  uint64_t decisions = 0;
  while (!g.is_done()) {
    const int seat = g.pending().front();
    const std::vector<Action> legal = g.legal_actions(seat);
    const Action* pick = nullptr;
    std::vector<const Action*> best;
    int best_sh = 99;
    for (const Action& a : legal) {
      switch (a.type) {
        case ActionType::Tsumo:
        case ActionType::Ron:
          pick = &a;
          break;
        case ActionType::Riichi:
          if (!pick && coin(0.8)) pick = &a;
          break;
        case ActionType::Ankan:
        case ActionType::Kakan:
        case ActionType::Daiminkan:
        case ActionType::Pon:
        case ActionType::Chi:
          if (!pick && coin(call_prob)) pick = &a;
          break;
        case ActionType::Kyuushu:
          if (!pick && coin(0.5)) pick = &a;
          break;
        case ActionType::Discard: {
          Counts c{};
          for (int t : g.hand(seat)) ++c[kind_of(t)];
          --c[kind_of(a.tile)];
          const int sh = shanten(c);
          if (sh < best_sh) best_sh = sh, best.clear();
          if (sh == best_sh) best.push_back(&a);
          break;
        }
        default:
          break;
      }
      if (pick && (pick->type == ActionType::Tsumo || pick->type == ActionType::Ron)) break;
    }
    if (!pick && !best.empty()) pick = best[rng.below(static_cast<uint32_t>(best.size()))];
    if (!pick) {  // claims window with no call taken: pass
      for (const Action& a : legal)
        if (a.type == ActionType::Pass) pick = &a;
    }
    if (!pick) pick = &legal[rng.below(static_cast<uint32_t>(legal.size()))];
    g.step(seat, *pick);
    ++decisions;
  }
  return decisions;
}

}  // namespace

void register_mahjong(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("mahjong", "Riichi mahjong engine: tiles, shanten, scoring.");

  m.def("kind_to_mjai", [](int kind, bool red) { return rethrow([&] { return kind_to_mjai(kind, red); }); },
        "kind"_a, "red"_a = false, "MJAI string of a tile kind in [0, 34) ('1m', '5pr', 'E', 'C').");
  m.def("tile_to_mjai", [](int tile, bool red_fives) { return rethrow([&] { return tile_to_mjai(tile, red_fives); }); },
        "tile"_a, "red_fives"_a = true, "MJAI string of a 136 tile id (ids 16/52/88 are the red fives).");
  m.def("mjai_to_kind", [](const std::string& s) {
        return rethrow([&] {
          bool red = false;
          int k = mjai_to_kind(s, &red);
          return std::make_pair(k, red);
        });
      }, "s"_a, "(kind, is_red) of an MJAI tile string; ValueError names the accepted forms.");

  m.def("init_shanten_tables", &init_shanten_tables,
        "Build the shanten tables now (about 20 MB, built once on first use otherwise).");
  m.def("shanten", [](const std::vector<int>& counts) { return rethrow([&] { return shanten(to_counts(counts)); }); },
        "counts"_a,
        "Shanten (replacement number - 1; -1 = complete) of a concealed hand given as 34 counts.");
  m.def("shanten_parts", [](const std::vector<int>& counts) {
        return rethrow([&] {
          Counts c = to_counts(counts);
          return std::vector<int>{shanten_regular(c), shanten_chiitoitsu(c), shanten_kokushi(c)};
        });
      }, "counts"_a, "[regular, seven pairs, thirteen orphans] shanten (99 where the form needs 13+ tiles).");
  m.def(
      "shanten_batch",
      [](nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> hands) {
        if (hands.shape(1) != kNumKinds) {
          throw nb::value_error("shanten_batch: hands must have shape (N, 34) (uint8 counts)");
        }
        const size_t n = hands.shape(0);
        auto* out = new int8_t[n * 4];
        nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<int8_t*>(p); });
        {
          nb::gil_scoped_release release;
          try {
            for (size_t i = 0; i < n; ++i) {
              Counts c;
              for (int k = 0; k < kNumKinds; ++k) c[k] = hands.data()[i * kNumKinds + k];
              const int r = shanten_regular(c), q = shanten_chiitoitsu(c), o = shanten_kokushi(c);
              out[i * 4 + 0] = static_cast<int8_t>(std::min({r, q, o}));
              out[i * 4 + 1] = static_cast<int8_t>(r);
              out[i * 4 + 2] = static_cast<int8_t>(q);
              out[i * 4 + 3] = static_cast<int8_t>(o);
            }
          } catch (const std::invalid_argument& e) {
            nb::gil_scoped_acquire acquire;
            throw nb::value_error(e.what());
          }
        }
        return nb::ndarray<nb::numpy, int8_t, nb::ndim<2>>(out, {n, 4}, owner);
      },
      "hands"_a,
      "Shanten of N hands ((N, 34) uint8 counts) -> (N, 4) int8: [min, regular, seven pairs, orphans].");

  m.def("splitmix64", [](uint64_t seed, int n) {
        SplitMix64 g(seed);
        std::vector<uint64_t> out(n);
        for (auto& x : out) x = g.next();
        return out;
      }, "seed"_a, "n"_a, "First n outputs of the vendored SplitMix64 (checked against published values).");
  m.def("game_key", &game_key, "session_seed"_a, "game"_a, "Stream key of one game of a session.");
  m.def("hand_key", &hand_key, "session_seed"_a, "game"_a, "kyoku"_a, "honba"_a,
        "Key of one hand's wall: (session seed, game index, kyoku 0 = East 1, honba).");
  m.def("make_wall", [](uint64_t key) {
        auto w = make_wall(key);
        return std::vector<int>(w.begin(), w.end());
      }, "key"_a, "136 tile ids: draws from index 0, dead wall = last 14 (rinshan, dora, ura).");
  m.def("wall", [](uint64_t seed, uint64_t game, uint32_t kyoku, uint32_t honba) {
        auto w = make_wall(hand_key(seed, game, kyoku, honba));
        return std::vector<int>(w.begin(), w.end());
      }, "session_seed"_a, "game"_a, "kyoku"_a, "honba"_a, "The wall of one hand (make_wall(hand_key(...))).");

  nb::class_<Action>(m, "Action", "One decision: type, tile (136 id or -1), consumed own tiles (chi/pon/kan).")
      .def("__init__",
           [](Action* a, const std::string& type, int tile, const std::vector<int>& consumed) {
             if (consumed.size() > 3) throw nb::value_error("Action: at most 3 consumed tiles");
             new (a) Action{parse_action_type(type), tile, {-1, -1, -1}};
             for (size_t i = 0; i < consumed.size(); ++i) a->consumed[i] = consumed[i];
           },
           "type"_a, "tile"_a = -1, "consumed"_a = std::vector<int>{})
      .def_prop_ro("type", [](const Action& a) { return std::string(action_type_name(a.type)); })
      .def_ro("tile", &Action::tile)
      .def_prop_ro("consumed", [](const Action& a) {
        std::vector<int> v;
        for (int c : a.consumed)
          if (c >= 0) v.push_back(c);
        return v;
      })
      .def("__eq__", [](const Action& a, const Action& b) { return a == b; })
      .def("__hash__", [](const Action& a) {
        return (static_cast<int>(a.type) * 1000003) ^ (a.tile * 7919) ^ (a.consumed[0] * 131) ^ (a.consumed[1] * 17) ^ a.consumed[2];
      })
      .def("__repr__", [](const Action& a) { return "Action(" + a.to_string() + ")"; });

  nb::class_<Game>(m, "Game", "A whole 4-player riichi game; see docs/mahjong_engine.md.")
      .def("__init__",
           [](Game* g, bool red_fives, bool open_tanyao, bool double_yakuman, bool kazoe_yakuman, bool kiriage,
              bool east_only, int start_points, int return_points, bool agari_yame, bool bust_ends, bool double_ron,
              bool triple_ron_abort, bool nagashi_mangan, bool kyuushu_kyuuhai, bool suufon_renda, bool suucha_riichi,
              bool suukaikan, bool pao) {
             new (g) Game(make_rules(red_fives, open_tanyao, double_yakuman, kazoe_yakuman, kiriage, east_only,
                                     start_points, return_points, agari_yame, bust_ends, double_ron, triple_ron_abort,
                                     nagashi_mangan, kyuushu_kyuuhai, suufon_renda, suucha_riichi, suukaikan, pao));
           },
           nb::kw_only(), "red_fives"_a = true, "open_tanyao"_a = true, "double_yakuman"_a = true,
           "kazoe_yakuman"_a = true, "kiriage"_a = false, "east_only"_a = false, "start_points"_a = 25000,
           "return_points"_a = 30000, "agari_yame"_a = true, "bust_ends"_a = true, "double_ron"_a = true,
           "triple_ron_abort"_a = true, "nagashi_mangan"_a = true, "kyuushu_kyuuhai"_a = true,
           "suufon_renda"_a = true, "suucha_riichi"_a = true, "suukaikan"_a = true, "pao"_a = true)
      .def("reset", &Game::reset, "session_seed"_a, "game_index"_a = 0,
           "Start a new game; walls come from (session_seed, game_index, kyoku, honba).")
      .def("reset_with_walls", [](Game& g, const std::vector<std::vector<int>>& walls) {
        std::vector<std::array<uint8_t, 136>> ws;
        for (const auto& w : walls) {
          if (w.size() != 136) throw nb::value_error("reset_with_walls: each wall has 136 tile ids");
          std::array<uint8_t, 136> a;
          for (int i = 0; i < 136; ++i) {
            if (w[i] < 0 || w[i] >= 136) throw nb::value_error("reset_with_walls: tile ids are in 0..135");
            a[i] = static_cast<uint8_t>(w[i]);
          }
          ws.push_back(a);
        }
        rethrow([&] { g.reset_with_walls(std::move(ws)); return 0; });
      }, "walls"_a, "Start a game whose hands use these walls in order (MJAI replay).")
      .def("pending", &Game::pending, "Seats that must act now.")
      .def("legal_actions", [](const Game& g, int seat) { return rethrow([&] { return g.legal_actions(seat); }); },
           "seat"_a)
      .def("step", [](Game& g, int seat, const Action& a) { rethrow([&] { g.step(seat, a); return 0; }); },
           "seat"_a, "action"_a,
           "Apply one action; ValueError (seat, action, legal set) leaves the game unchanged.")
      .def("is_done", &Game::is_done)
      .def_prop_ro("scores", [](const Game& g) { return g.scores(); })
      .def("hand", [](const Game& g, int seat) { return g.hand(seat); }, "seat"_a)
      .def("melds", [](const Game& g, int seat) { return melds_to_list(g.melds(seat)); }, "seat"_a)
      .def("discards", [](const Game& g, int seat) { return g.discards(seat); }, "seat"_a)
      .def("in_riichi", &Game::in_riichi, "seat"_a)
      .def_prop_ro("dora_indicators", &Game::dora_indicators)
      .def_prop_ro("kyoku", &Game::kyoku)
      .def_prop_ro("honba", &Game::honba)
      .def_prop_ro("riichi_sticks", &Game::riichi_sticks)
      .def_prop_ro("dealer", &Game::dealer)
      .def_prop_ro("tiles_left", &Game::tiles_left)
      .def_prop_ro("hands_played", &Game::hands_played)
      .def("events", [](const Game& g, size_t start) {
        const auto& ev = g.events();
        return std::vector<std::string>(ev.begin() + std::min(start, ev.size()), ev.end());
      }, "start"_a = 0, "MJAI events (JSON strings) so far, from index `start`.")
      .def_prop_ro("event_count", [](const Game& g) { return g.events().size(); })
      .def("wins", [](const Game& g) {
        nb::list l;
        for (const WinRecord& w : g.wins()) l.append(win_record_to_dict(w));
        return l;
      }, "Every win: winner, loser (-1 tsumo), scoring input, result and applied deltas.")
      .def("set_record_events", &Game::set_record_events, "on"_a)
      .def("random_playout", [](Game& g, uint64_t policy_seed) {
        nb::gil_scoped_release release;
        return random_playout(g, policy_seed);
      }, "policy_seed"_a, "Play uniformly random legal actions to the end in C++; returns the decision count.")
      .def("greedy_playout", [](Game& g, uint64_t policy_seed, double call_prob) {
        nb::gil_scoped_release release;
        return greedy_playout(g, policy_seed, call_prob);
      }, "policy_seed"_a, "call_prob"_a = 0.3,
      "Play to the end with a simple rule-based policy in C++ (wins, riichi, shanten-greedy discards).")
      .def("__copy__", [](const Game& g) { return Game(g); })
      .def("redeal_wall", &Game::redeal_wall, "seed"_a,
           "Shuffle the tiles no seat has seen (the undrawn wall, rinshan, unrevealed dora, ura) among their places.")
      .def_prop_ro("wall_tiles", [](const Game& g) {
        const auto& w = g.wall_tiles();
        return std::vector<int>(w.begin(), w.end());
      }, "The hand's wall, 136 tile ids (oracle: see game.hpp for its layout).")
      .def_prop_ro("draw_pos", &Game::draw_pos, "Live-wall tiles drawn so far, the deal's 52 included.");

  m.def(
      "score_hand",
      [](const std::vector<int>& closed, const std::vector<std::pair<std::string, std::vector<int>>>& melds,
         int win_tile, bool tsumo, bool riichi, bool double_riichi, bool ippatsu, bool rinshan, bool chankan,
         bool haitei, bool houtei, bool tenhou, bool chiihou, int seat_wind, int round_wind,
         const std::vector<int>& dora_indicators, const std::vector<int>& ura_indicators, int honba,
         int riichi_sticks, bool red_fives, bool open_tanyao, bool double_yakuman, bool kazoe_yakuman,
         bool kiriage) {
        WinInput in;
        in.closed = closed;
        for (const auto& [type, tiles] : melds) in.melds.push_back({parse_meld_type(type), tiles});
        in.win_tile = win_tile;
        in.tsumo = tsumo, in.riichi = riichi || double_riichi, in.double_riichi = double_riichi;
        in.ippatsu = ippatsu, in.rinshan = rinshan, in.chankan = chankan;
        in.haitei = haitei, in.houtei = houtei, in.tenhou = tenhou, in.chiihou = chiihou;
        in.seat_wind = seat_wind, in.round_wind = round_wind;
        in.dora_indicators = dora_indicators, in.ura_indicators = ura_indicators;
        in.honba = honba, in.riichi_sticks = riichi_sticks;
        Rules rules;
        rules.red_fives = red_fives, rules.open_tanyao = open_tanyao, rules.double_yakuman = double_yakuman;
        rules.kazoe_yakuman = kazoe_yakuman, rules.kiriage = kiriage;
        return result_to_dict(rethrow([&] { return score_hand(in, rules); }));
      },
      "closed"_a, "melds"_a = std::vector<std::pair<std::string, std::vector<int>>>{}, "win_tile"_a,
      nb::kw_only(), "tsumo"_a = false, "riichi"_a = false, "double_riichi"_a = false, "ippatsu"_a = false,
      "rinshan"_a = false, "chankan"_a = false, "haitei"_a = false, "houtei"_a = false, "tenhou"_a = false,
      "chiihou"_a = false, "seat_wind"_a = 0, "round_wind"_a = 0,
      "dora_indicators"_a = std::vector<int>{}, "ura_indicators"_a = std::vector<int>{}, "honba"_a = 0,
      "riichi_sticks"_a = 0, "red_fives"_a = true, "open_tanyao"_a = true, "double_yakuman"_a = true,
      "kazoe_yakuman"_a = true, "kiriage"_a = false,
      "Score a win. Tiles are 136 ids; melds are (type, tiles) with type chi/pon/daiminkan/ankan/kakan.\n"
      "Returns a dict: ok, error, han, fu, yakuman, yaku [(name, han)], dora, aka, ura, limit, payment.");
  register_encode(m);
  register_bots(m);
  register_batch(m);
}

}  // namespace meeple::mj
