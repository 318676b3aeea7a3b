// Placeholder until the bots land (issue #5): fails loudly.
#include "bots.hpp"

#include <stdexcept>

namespace meeple::mj {
Bot bot_from_name(const std::string& name) {
  if (name == "random") return Bot::Random;
  if (name == "rule") return Bot::Rule;
  throw std::invalid_argument("unknown bot '" + name + "'; accepted: random, rule");
}
const char* bot_name(Bot bot) { return bot == Bot::Random ? "random" : "rule"; }
Action bot_action(Bot, const Game&, int, SplitMix64&) { throw std::logic_error("bot_action: not built yet"); }
}  // namespace meeple::mj
