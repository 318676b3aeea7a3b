// Built-in opponents of the mahjong env: a random legal bot and a rule-based bot.
#pragma once

#include <string>

#include "game.hpp"
#include "wall.hpp"

namespace meeple::mj {

enum class Bot : uint8_t { Random, Rule };

// "random" or "rule"; throws std::invalid_argument naming the accepted names.
Bot bot_from_name(const std::string& name);
const char* bot_name(Bot bot);

// The bot's choice for `seat`, which must have legal actions in `g` now. `rng` is the
// seat's own stream, so a bot's play depends only on its seed and the game.
Action bot_action(Bot bot, const Game& g, int seat, SplitMix64& rng);

}  // namespace meeple::mj
