#include "connect4.hpp"

namespace meeple::c4 {

namespace {

std::string status_phrase(const Connect4& s) {
  switch (s.status()) {
    case Status::kFirstWon: return "the first player won";
    case Status::kSecondWon: return "the second player won";
    case Status::kDraw: return "the board is full (draw)";
    default: return "it is still going";
  }
}

}  // namespace

Connect4 Connect4::from_moves(const std::string& moves) {
  Connect4 s;
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const char ch = moves[i];
    if (ch < '1' || ch > '0' + kWidth) {
      // Report the character index (UTF-8 aware) and the whole character.
      std::size_t index = 0;
      for (std::size_t j = 0; j < i; ++j)
        if ((static_cast<unsigned char>(moves[j]) & 0xC0) != 0x80) ++index;
      std::size_t end = i + 1;
      while (end < moves.size() && (static_cast<unsigned char>(moves[end]) & 0xC0) == 0x80) ++end;
      std::string shown = moves.substr(i, end - i);
      if (static_cast<unsigned char>(ch) < 32 || static_cast<unsigned char>(ch) == 127) {
        static const char* kHex = "0123456789abcdef";
        const auto u = static_cast<unsigned char>(ch);
        shown = std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
      }
      throw std::invalid_argument("bad character '" + shown + "' at index " + std::to_string(index) +
                                  " of moves '" + moves + "': expected a column digit '1'..'" +
                                  std::to_string(kWidth) + "'");
    }
    const int col = ch - '1';
    if (s.is_terminal()) {
      throw std::invalid_argument("move '" + std::string(1, ch) + "' at index " + std::to_string(i) +
                                  " of moves '" + moves + "' comes after the game ended (" +
                                  status_phrase(s) + " after " + std::to_string(s.moves_played()) +
                                  " moves)");
    }
    if (!s.can_play(col)) {
      throw std::invalid_argument("column " + std::to_string(col + 1) + " is full at index " +
                                  std::to_string(i) + " of moves '" + moves + "'");
    }
    s.play(col);
  }
  return s;
}

void Connect4::play_checked(int col) {
  if (col < 0 || col >= kWidth) {
    throw std::invalid_argument("column " + std::to_string(col) + " is out of range: expected 0.." +
                                std::to_string(kWidth - 1) + " (0-based)");
  }
  if (is_terminal()) {
    throw std::invalid_argument("cannot play column " + std::to_string(col) +
                                ": the game is over (" + status_phrase(*this) + ")");
  }
  if (!can_play(col)) {
    throw std::invalid_argument("column " + std::to_string(col) + " (0-based) is full");
  }
  play(col);
}

std::string Connect4::board_string() const {
  // Absolute colours: the first player's stones are the side to move's stones
  // when an even number of moves has been played.
  const Bitboard first = (moves_ & 1) ? (current_ ^ mask_) : current_;
  std::string out;
  for (int h = kHeight - 1; h >= 0; --h) {
    out += '|';
    for (int c = 0; c < kWidth; ++c) {
      const Bitboard b = cell_bit(c, h);
      out += (mask_ & b) ? ((first & b) ? 'X' : 'O') : '.';
    }
    out += "|\n";
  }
  out += "+";
  for (int c = 0; c < kWidth; ++c) out += '-';
  out += "+\n ";
  for (int c = 0; c < kWidth; ++c) out += static_cast<char>('1' + c);
  return out;
}

}  // namespace meeple::c4
