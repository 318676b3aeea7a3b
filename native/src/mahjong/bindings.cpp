// Python bindings of the mahjong engine -> meeple_native._core.mahjong (a submodule).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <string>
#include <vector>

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
}

}  // namespace meeple::mj
