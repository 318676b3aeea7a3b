// The fixed discrete action space of the mahjong env (155 actions) and its legal mask.
//
// Every engine Action maps to exactly one index; the legal actions of one decision map
// to distinct indices, so index -> Action is a lookup in the decision's legal list.
//
//   [  0,  37) discard of tile class c: kinds 0-33, then 34/35/36 = red 5m/5p/5s
//   [ 37,  74) riichi declared with the discard of class c (37 + c)
//   [ 74,  80) chi: 74 + 2*pos + red; pos 0/1/2 = the called tile is the lowest/middle/
//              highest of the run, red = one of the two own tiles used is a red five
//   [ 80,  82) pon: 80 + red (one or both own tiles used include a red five)
//   82         daiminkan (open kan on a discard)
//   [ 83, 117) ankan (closed kan) of kind k (83 + k)
//   [117, 151) kakan (added kan) of kind k (117 + k)
//   151 tsumo, 152 ron, 153 pass (decline every claim), 154 kyuushu kyuuhai (abort)
// With red fives off, fives are plain: classes 34-36 and the red chi/pon slots stay unused.
#pragma once

#include <cstdint>
#include <vector>

#include "game.hpp"

namespace meeple::mj {

constexpr int kNumActions = 155;
constexpr int kDiscardBase = 0, kRiichiBase = 37, kChiBase = 74, kPonBase = 80, kDaiminkan = 82;
constexpr int kAnkanBase = 83, kKakanBase = 117, kTsumoAction = 151, kRonAction = 152;
constexpr int kPassAction = 153, kKyuushuAction = 154;

// Discard class of a tile id (0-33 kind, 34-36 red five of man/pin/sou).
int tile_class(int tile, bool red_fives);
// The index of an engine action (red_fives as in the game's rules). Throws
// std::invalid_argument for an action with no index (malformed tile fields).
int action_index(const Action& a, bool red_fives);

// Legal actions of `seat` (empty when it need not act) as a mask of kNumActions bytes
// (1 legal, 0 not) in `mask`; `lookup` (kNumActions entries, or null) gets the engine
// action of each legal index. Returns the number of legal actions.
int legal_mask(const Game& g, int seat, uint8_t* mask, Action* lookup = nullptr);

}  // namespace meeple::mj
