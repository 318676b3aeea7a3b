#include "tiles.hpp"

namespace meeple::mj {

namespace {
constexpr const char* kHonorNames[7] = {"E", "S", "W", "N", "P", "F", "C"};
constexpr char kSuitChars[3] = {'m', 'p', 's'};
}  // namespace

std::string kind_to_mjai(int kind, bool red) {
  if (kind < 0 || kind >= kNumKinds) {
    throw std::invalid_argument("tile kind must be in [0, 34), got " + std::to_string(kind));
  }
  if (is_honor(kind)) return kHonorNames[kind - 27];
  std::string s{static_cast<char>('1' + rank_of(kind)), kSuitChars[suit_of(kind)]};
  if (red && rank_of(kind) == 4) s += 'r';
  return s;
}

std::string tile_to_mjai(int tile, bool red_fives) {
  if (tile < 0 || tile >= kNumTiles) {
    throw std::invalid_argument("tile id must be in [0, 136), got " + std::to_string(tile));
  }
  return kind_to_mjai(kind_of(tile), red_fives && is_red(tile));
}

int mjai_to_kind(const std::string& s, bool* red) {
  if (red) *red = false;
  if (s.size() == 1) {
    for (int i = 0; i < 7; ++i) {
      if (s[0] == kHonorNames[i][0]) return 27 + i;
    }
  } else if ((s.size() == 2 || s.size() == 3) && s[0] >= '1' && s[0] <= '9') {
    for (int su = 0; su < 3; ++su) {
      if (s[1] != kSuitChars[su]) continue;
      int kind = su * 9 + (s[0] - '1');
      if (s.size() == 2) return kind;
      if (s[2] == 'r' && s[0] == '5') {
        if (red) *red = true;
        return kind;
      }
    }
  }
  throw std::invalid_argument("bad MJAI tile '" + s +
                              "': expected 1m-9m, 1p-9p, 1s-9s, 5mr/5pr/5sr, or E S W N P F C");
}

}  // namespace meeple::mj
