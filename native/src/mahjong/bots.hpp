// Built-in opponents of the mahjong env: a random legal bot and a rule-based bot.
//
// The rule bot (docs/mahjong_bots.md) wins when it can, takes nine-terminals, discards to
// lower shanten with ukeire tie-breaks (tiles it cannot see), declares riichi when tenpai,
// folds to the safest tile against a riichi when its own hand is far, and pons yakuhai.
// It reads only what its seat may see (own hand, every discard and meld, dora indicators,
// discard order and riichi declarations: discards after a riichi are genbutsu against it).
// Stateless and allocation-light: safe to call from several threads on different games.
#pragma once

#include <array>
#include <string>

#include "game.hpp"
#include "wall.hpp"

namespace meeple::mj {

// RuleNoFold: the rule bot that never folds (the control for measuring folding).
enum class Bot : uint8_t { Random, Rule, RuleNoFold };

// "random", "rule" or "rule-nofold"; throws std::invalid_argument naming the accepted names.
Bot bot_from_name(const std::string& name);
const char* bot_name(Bot bot);

// The bot's choice for `seat`, which must have legal actions in `g` now. `rng` is the
// seat's own stream, so a bot's play depends only on its seed and the game.
Action bot_action(Bot bot, const Game& g, int seat, SplitMix64& rng);

// A whole game played by bots from the game's current state (after reset).
struct SeatStats {
  int score = 0, rank = 0;  // rank 1..4, ties broken by seat order (lower seat first)
  int wins = 0, tsumo = 0, deal_ins = 0, riichi = 0, calls = 0;
  int decisions = 0;
};
struct BotMatch {
  std::array<SeatStats, 4> seats;
  int hands = 0;
};
// 0-based final placement of each seat: higher score first, ties to the lower seat.
std::array<int, 4> placements(const std::array<int, 4>& scores);

// Counts a game as it is played, for play_bots and the batch simulator alike.
struct MatchTally {
  BotMatch counts;                 // decisions, riichi and calls so far
  std::array<size_t, 4> melds{};   // meld counts seen, to spot new open melds
  // Applies `a` for `seat` to `g` and counts it.
  void step(Game& g, int seat, const Action& a);
  // The counts plus what the finished game says: wins, tsumo, deal-ins, ranks, scores, hands.
  BotMatch result(const Game& g) const;
};

// Seat s uses its own stream seeded from (policy_seed, s): a seat's randomness does not
// depend on which bot sits elsewhere, so rotating bots over seats replays comparable games.
BotMatch play_bots(Game& g, const std::array<Bot, 4>& bots, uint64_t policy_seed);
uint64_t seat_stream_seed(uint64_t policy_seed, int seat);

}  // namespace meeple::mj
