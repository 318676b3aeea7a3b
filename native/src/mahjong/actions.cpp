#include "actions.hpp"

#include <stdexcept>
#include <string>

namespace meeple::mj {

int tile_class(int tile, bool red_fives) {
  if (tile < 0 || tile >= kNumTiles) throw std::invalid_argument("tile id " + std::to_string(tile) + " not in [0, 136)");
  return red_fives && is_red(tile) ? 34 + suit_of(kind_of(tile)) : kind_of(tile);
}

int action_index(const Action& a, bool red_fives) {
  auto red_used = [&] {
    for (int t : a.consumed)
      if (t >= 0 && red_fives && is_red(t)) return 1;
    return 0;
  };
  switch (a.type) {
    case ActionType::Discard:
      return kDiscardBase + tile_class(a.tile, red_fives);
    case ActionType::Riichi:
      return kRiichiBase + tile_class(a.tile, red_fives);
    case ActionType::Chi: {
      const int c = kind_of(a.tile), x = kind_of(a.consumed[0]), y = kind_of(a.consumed[1]);
      if (a.tile < 0 || a.consumed[0] < 0 || a.consumed[1] < 0)
        throw std::invalid_argument("chi without its called and own tiles: " + a.to_string());
      const int lo = x < y ? x : y, hi = x < y ? y : x;
      const int pos = c < lo ? 0 : (c < hi ? 1 : 2);
      return kChiBase + 2 * pos + red_used();
    }
    case ActionType::Pon:
      return kPonBase + red_used();
    case ActionType::Daiminkan:
      return kDaiminkan;
    case ActionType::Ankan:
      return kAnkanBase + kind_of(a.tile);
    case ActionType::Kakan:
      return kKakanBase + kind_of(a.tile);
    case ActionType::Tsumo:
      return kTsumoAction;
    case ActionType::Ron:
      return kRonAction;
    case ActionType::Pass:
      return kPassAction;
    case ActionType::Kyuushu:
      return kKyuushuAction;
  }
  throw std::invalid_argument("unknown action type");
}

int legal_mask(const Game& g, int seat, uint8_t* mask, Action* lookup) {
  for (int i = 0; i < kNumActions; ++i) mask[i] = 0;
  const bool red = g.rules().scoring.red_fives;
  int n = 0;
  for (const Action& a : g.legal_actions(seat)) {
    const int i = action_index(a, red);
    if (mask[i]) throw std::logic_error("two legal actions share index " + std::to_string(i) + ": " + a.to_string());
    mask[i] = 1;
    ++n;
    if (lookup) lookup[i] = a;
  }
  return n;
}

}  // namespace meeple::mj
