// Position: FEN, legal move generation (check and pin masks), copy-make moves.
#include "chess/position.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace meeple::chess {
namespace {

struct Zobrist {
  std::uint64_t piece[2][6][64];
  std::uint64_t castle[16];
  std::uint64_t ep[8];
  std::uint64_t side;
  Zobrist() {
    std::uint64_t x = 0x6A09E667F3BCC909ULL;  // fixed seed: keys are the same in every process
    auto next = [&x] {
      std::uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      return z ^ (z >> 31);
    };
    for (auto& c : piece)
      for (auto& t : c)
        for (auto& s : t) s = next();
    for (auto& c : castle) c = next();
    for (auto& e : ep) e = next();
    side = next();
  }
};
const Zobrist kZ;

// Castling rights that survive a move from or to each square.
struct CastleMask {
  std::uint8_t m[64];
  CastleMask() {
    for (auto& v : m) v = 15;
    m[0] = static_cast<std::uint8_t>(~kWhiteOOO & 15);
    m[4] = static_cast<std::uint8_t>(~(kWhiteOO | kWhiteOOO) & 15);
    m[7] = static_cast<std::uint8_t>(~kWhiteOO & 15);
    m[56] = static_cast<std::uint8_t>(~kBlackOOO & 15);
    m[60] = static_cast<std::uint8_t>(~(kBlackOO | kBlackOOO) & 15);
    m[63] = static_cast<std::uint8_t>(~kBlackOO & 15);
  }
};
const CastleMask kCastleMask;

constexpr std::uint8_t kEmpty = kNoPieceType;
constexpr char kPieceChars[] = "pnbrqk";

[[noreturn]] void bad_fen(const std::string& fen, const std::string& why) {
  throw std::invalid_argument("invalid FEN '" + fen + "': " + why);
}

}  // namespace

void Position::clear() {
  for (auto& b : by_type_) b = 0;
  by_color_[0] = by_color_[1] = 0;
  for (auto& s : board_) s = kEmpty;
  side_ = kWhite;
  castling_ = 0;
  ep_ = -1;
  halfmove_ = 0;
  fullmove_ = 1;
  key_ = 0;
}

void Position::put(int sq, Color c, PieceType t) {
  by_type_[t] |= bit(sq);
  by_color_[c] |= bit(sq);
  board_[sq] = static_cast<std::uint8_t>((c << 3) | t);
  key_ ^= kZ.piece[c][t][sq];
}

void Position::remove(int sq) {
  const PieceType t = type_on(sq);
  const Color c = color_on(sq);
  by_type_[t] &= ~bit(sq);
  by_color_[c] &= ~bit(sq);
  board_[sq] = kEmpty;
  key_ ^= kZ.piece[c][t][sq];
}

std::uint64_t Position::compute_key() const {
  std::uint64_t k = 0;
  for (int sq = 0; sq < 64; ++sq)
    if (type_on(sq) != kNoPieceType) k ^= kZ.piece[color_on(sq)][type_on(sq)][sq];
  k ^= kZ.castle[castling_];
  if (ep_ >= 0) k ^= kZ.ep[file_of(ep_)];
  if (side_ == kBlack) k ^= kZ.side;
  return k;
}

Bitboard Position::attackers(int sq, Color by, Bitboard occ) const {
  const Bitboard them = by_color_[by];
  const Bitboard diag = by_type_[kBishop] | by_type_[kQueen];
  const Bitboard ortho = by_type_[kRook] | by_type_[kQueen];
  return them & ((pawn_attacks(~by, sq) & by_type_[kPawn]) | (knight_attacks(sq) & by_type_[kKnight]) |
                 (king_attacks(sq) & by_type_[kKing]) | (bishop_attacks(sq, occ) & diag) |
                 (rook_attacks(sq, occ) & ortho));
}

// En passant needs its own test: removing two pawns from one rank can expose
// the king to a rook or queen on that rank, which the pin masks do not see.
bool Position::ep_capture_legal(int from, int ep_sq) const {
  const Color us = side_, them = ~us;
  const int cap = ep_sq + (us == kWhite ? -8 : 8);
  const Bitboard occ = (occupied() ^ bit(from) ^ bit(cap)) | bit(ep_sq);
  const int ks = king_square(us);
  const Bitboard enemy = by_color_[them] & ~bit(cap);
  const Bitboard diag = (by_type_[kBishop] | by_type_[kQueen]) & enemy;
  const Bitboard ortho = (by_type_[kRook] | by_type_[kQueen]) & enemy;
  if ((bishop_attacks(ks, occ) & diag) || (rook_attacks(ks, occ) & ortho)) return false;
  if (knight_attacks(ks) & by_type_[kKnight] & enemy) return false;
  if (pawn_attacks(us, ks) & by_type_[kPawn] & enemy) return false;
  return true;
}

bool Position::any_legal_ep(int ep_sq) const {
  const int cap = ep_sq + (side_ == kWhite ? -8 : 8);
  if (type_on(ep_sq) != kNoPieceType || type_on(cap) != kPawn || color_on(cap) == side_) return false;
  Bitboard cands = pawn_attacks(~side_, ep_sq) & pieces(side_, kPawn);
  while (cands)
    if (ep_capture_legal(pop_lsb(cands), ep_sq)) return true;
  return false;
}

template <bool kStopAtFirst>
int Position::generate(MoveList* out) const {
  const Color us = side_, them = ~us;
  const Bitboard own = by_color_[us], enemy = by_color_[them], occ = own | enemy;
  const int ks = king_square(us);
  const Bitboard checkers = attackers(ks, them, occ);
  int count = 0;
  // Returns true when the caller should stop (first move found).
  auto emit = [&](int from, int to, int promo) {
    if (out) out->push(from, to, promo);
    ++count;
    return kStopAtFirst;
  };

  // King steps: the king itself must not shield the square it moves to.
  const Bitboard occ_no_king = occ ^ bit(ks);
  for (Bitboard t = king_attacks(ks) & ~own; t;) {
    const int to = pop_lsb(t);
    if (!attackers(to, them, occ_no_king) && emit(ks, to, kNoPieceType)) return count;
  }
  if (checkers & (checkers - 1)) return count;  // double check: only the king moves

  const Bitboard checkmask = checkers ? (between(ks, lsb(checkers)) | checkers) : ~Bitboard{0};
  // Pinned pieces: one own piece between the king and an enemy slider.
  Bitboard pinned = 0;
  {
    const Bitboard diag = (by_type_[kBishop] | by_type_[kQueen]) & enemy;
    const Bitboard ortho = (by_type_[kRook] | by_type_[kQueen]) & enemy;
    Bitboard snipers = (bishop_attacks(ks, enemy) & diag) | (rook_attacks(ks, enemy) & ortho);
    while (snipers) {
      const Bitboard b = between(ks, pop_lsb(snipers)) & occ;
      if (b && !(b & (b - 1)) && (b & own)) pinned |= b;
    }
  }

  if (!checkers) {
    const int base = us == kWhite ? 0 : 56;
    const std::uint8_t oo = us == kWhite ? kWhiteOO : kBlackOO;
    const std::uint8_t ooo = us == kWhite ? kWhiteOOO : kBlackOOO;
    if ((castling_ & oo) && !(occ & (bit(base + 5) | bit(base + 6))) && !attackers(base + 5, them, occ) &&
        !attackers(base + 6, them, occ) && emit(base + 4, base + 6, kNoPieceType))
      return count;
    if ((castling_ & ooo) && !(occ & (bit(base + 1) | bit(base + 2) | bit(base + 3))) &&
        !attackers(base + 3, them, occ) && !attackers(base + 2, them, occ) && emit(base + 4, base + 2, kNoPieceType))
      return count;
  }

  for (int pt = kKnight; pt <= kQueen; ++pt) {
    for (Bitboard pcs = pieces(us, static_cast<PieceType>(pt)); pcs;) {
      const int from = pop_lsb(pcs);
      Bitboard att;
      switch (pt) {
        case kKnight: att = (pinned & bit(from)) ? 0 : knight_attacks(from); break;
        case kBishop: att = bishop_attacks(from, occ); break;
        case kRook: att = rook_attacks(from, occ); break;
        default: att = queen_attacks(from, occ); break;
      }
      att &= ~own & checkmask;
      if (pinned & bit(from)) att &= line_through(ks, from);
      while (att)
        if (emit(from, pop_lsb(att), kNoPieceType)) return count;
    }
  }

  const int up = us == kWhite ? 8 : -8;
  const Bitboard last_rank = us == kWhite ? kRank8 : kRank1;
  const Bitboard start_rank = us == kWhite ? (kRank1 << 8) : (kRank8 >> 8);
  auto emit_pawn = [&](int from, int to) {
    if (bit(to) & last_rank) {
      for (int p : {kQueen, kRook, kBishop, kKnight})
        if (emit(from, to, p)) return true;
      return false;
    }
    return emit(from, to, kNoPieceType);
  };
  for (Bitboard pawns = pieces(us, kPawn); pawns;) {
    const int from = pop_lsb(pawns);
    Bitboard allowed = checkmask;
    if (pinned & bit(from)) allowed &= line_through(ks, from);
    const int to = from + up;
    if (!(occ & bit(to))) {
      if ((allowed & bit(to)) && emit_pawn(from, to)) return count;
      const int to2 = to + up;
      if ((bit(from) & start_rank) && !(occ & bit(to2)) && (allowed & bit(to2)) && emit(from, to2, kNoPieceType))
        return count;
    }
    for (Bitboard caps = pawn_attacks(us, from) & enemy & allowed; caps;)
      if (emit_pawn(from, pop_lsb(caps))) return count;
    if (ep_ >= 0 && (pawn_attacks(us, from) & bit(ep_)) && ep_capture_legal(from, ep_) &&
        emit(from, ep_, kNoPieceType))
      return count;
  }
  return count;
}

void Position::legal_moves(MoveList& out) const {
  out.size = 0;
  generate<false>(&out);
}

bool Position::has_legal_move() const { return generate<true>(nullptr) > 0; }

void Position::play(Move m) {
  const Color us = side_, them = ~us;
  const int from = m.from, to = m.to;
  const PieceType pt = type_on(from);
  if (ep_ >= 0) key_ ^= kZ.ep[file_of(ep_)];
  key_ ^= kZ.castle[castling_];
  int new_ep = -1;
  ++halfmove_;
  if (type_on(to) != kNoPieceType) {
    remove(to);
    halfmove_ = 0;
  }
  if (pt == kPawn) {
    halfmove_ = 0;
    if (to == ep_) {
      remove(to + (us == kWhite ? -8 : 8));
    } else if (std::abs(to - from) == 16) {
      new_ep = (from + to) / 2;
    }
  }
  remove(from);
  put(to, us, m.promo != kNoPieceType ? static_cast<PieceType>(m.promo) : pt);
  if (pt == kKing && std::abs(to - from) == 2) {  // castling: the rook jumps over the king
    const int rook_from = to > from ? from + 3 : from - 4;
    const int rook_to = to > from ? from + 1 : from - 1;
    remove(rook_from);
    put(rook_to, us, kRook);
  }
  castling_ &= kCastleMask.m[from] & kCastleMask.m[to];
  key_ ^= kZ.castle[castling_];
  side_ = them;
  key_ ^= kZ.side;
  if (us == kBlack) ++fullmove_;
  ep_ = -1;
  if (new_ep >= 0 && any_legal_ep(new_ep)) {
    ep_ = static_cast<std::int8_t>(new_ep);
    key_ ^= kZ.ep[file_of(new_ep)];
  }
}

bool Position::insufficient_material() const {
  if (by_type_[kPawn] | by_type_[kRook] | by_type_[kQueen]) return false;
  const Bitboard knights = by_type_[kKnight], bishops = by_type_[kBishop];
  if (!bishops) return popcount(knights) <= 1;
  if (knights) return false;
  return !(bishops & kDarkSquares) || !(bishops & ~kDarkSquares);
}

namespace {

// FEN fields split on whitespace. No iostreams: a module built by GCC 13 on the H200 image
// crashed (SIGSEGV) inside `istream >> int` here, in the locale's num_get facet; the cause was
// not found (docs/gpu.md, 2026-11-28, second session).
std::vector<std::string> fen_fields(const std::string& fen) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < fen.size()) {
    while (i < fen.size() && std::isspace(static_cast<unsigned char>(fen[i]))) ++i;
    const std::size_t start = i;
    while (i < fen.size() && !std::isspace(static_cast<unsigned char>(fen[i]))) ++i;
    if (i > start) out.emplace_back(fen, start, i - start);
  }
  return out;
}

int fen_counter(const std::string& fen, const std::string& field, const char* what) {
  int value = 0;
  const char* end = field.data() + field.size();
  const auto [at, ec] = std::from_chars(field.data(), end, value);
  if (ec != std::errc() || at != end) bad_fen(fen, std::string(what) + " must be an integer, got '" + field + "'");
  return value;
}

}  // namespace

void Position::set_fen(const std::string& fen) {
  const std::vector<std::string> fields = fen_fields(fen);
  if (fields.size() < 2) bad_fen(fen, "expected at least piece placement and side to move");
  if (fields.size() > 6) bad_fen(fen, "unexpected trailing field '" + fields[6] + "'");
  const std::string& placement = fields[0];
  const std::string& side = fields[1];
  const std::string castle = fields.size() > 2 ? fields[2] : "-";
  const std::string ep = fields.size() > 3 ? fields[3] : "-";
  const int half = fields.size() > 4 ? fen_counter(fen, fields[4], "half-move clock") : 0;
  int full = fields.size() > 5 ? fen_counter(fen, fields[5], "full-move number") : 1;
  if (half < 0) bad_fen(fen, "negative half-move clock");
  if (full < 1) full = 1;

  Position p{Blank{}};
  int rank = 7, file = 0;
  for (char ch : placement) {
    if (ch == '/') {
      if (file != 8) bad_fen(fen, "rank " + std::to_string(rank + 1) + " does not have 8 squares");
      --rank;
      file = 0;
      if (rank < 0) bad_fen(fen, "more than 8 ranks");
    } else if (ch >= '1' && ch <= '8') {
      file += ch - '0';
      if (file > 8) bad_fen(fen, "rank " + std::to_string(rank + 1) + " has more than 8 squares");
    } else {
      const char lower = static_cast<char>(ch | 0x20);
      const char* at = std::strchr(kPieceChars, lower);
      if (!at || file > 7) bad_fen(fen, std::string("bad piece character '") + ch + "'");
      p.put(make_square(file, rank), (ch == lower) ? kBlack : kWhite, static_cast<PieceType>(at - kPieceChars));
      ++file;
    }
  }
  if (rank != 0 || file != 8) bad_fen(fen, "piece placement must have 8 ranks of 8 squares");
  for (Color c : {kWhite, kBlack}) {
    const char* name = c == kWhite ? "white" : "black";
    if (popcount(p.pieces(c, kKing)) != 1) bad_fen(fen, std::string(name) + " must have exactly one king");
    const int pawns = popcount(p.pieces(c, kPawn));
    // Extra pieces must come from promotions: keeps every position reachable
    // in material, which bounds the legal moves (MoveList) and the planes.
    const int extra = std::max(0, popcount(p.pieces(c, kQueen)) - 1) + std::max(0, popcount(p.pieces(c, kRook)) - 2) +
                      std::max(0, popcount(p.pieces(c, kBishop)) - 2) +
                      std::max(0, popcount(p.pieces(c, kKnight)) - 2);
    if (pawns + extra > 8) bad_fen(fen, std::string(name) + " has more pieces than promotions allow");
  }
  if (p.pieces(kPawn) & (kRank1 | kRank8)) bad_fen(fen, "pawn on the first or last rank");
  if (side == "w") p.side_ = kWhite;
  else if (side == "b") p.side_ = kBlack;
  else bad_fen(fen, "side to move must be 'w' or 'b', got '" + side + "'");
  if (p.attackers(p.king_square(~p.side_), p.side_, p.occupied()))
    bad_fen(fen, "the side not to move is in check");
  if (castle != "-") {
    for (char ch : castle) {
      switch (ch) {
        case 'K': p.castling_ |= kWhiteOO; break;
        case 'Q': p.castling_ |= kWhiteOOO; break;
        case 'k': p.castling_ |= kBlackOO; break;
        case 'q': p.castling_ |= kBlackOOO; break;
        default: bad_fen(fen, std::string("bad castling character '") + ch + "'");
      }
    }
  }
  // Keep only rights whose king and rook stand on their original squares.
  auto on = [&](int sq, Color c, PieceType t) { return p.type_on(sq) == t && p.color_on(sq) == c; };
  if (!on(4, kWhite, kKing)) p.castling_ &= ~(kWhiteOO | kWhiteOOO);
  if (!on(7, kWhite, kRook)) p.castling_ &= ~kWhiteOO;
  if (!on(0, kWhite, kRook)) p.castling_ &= ~kWhiteOOO;
  if (!on(60, kBlack, kKing)) p.castling_ &= ~(kBlackOO | kBlackOOO);
  if (!on(63, kBlack, kRook)) p.castling_ &= ~kBlackOO;
  if (!on(56, kBlack, kRook)) p.castling_ &= ~kBlackOOO;
  if (ep != "-") {
    const bool ok = ep.size() == 2 && ep[0] >= 'a' && ep[0] <= 'h' && (ep[1] == '3' || ep[1] == '6');
    if (!ok) bad_fen(fen, "bad en passant square '" + ep + "'");
    const int sq = make_square(ep[0] - 'a', ep[1] - '1');
    // Kept only when a capture there is legal (see the header).
    if (rank_of(sq) == (p.side_ == kWhite ? 5 : 2) && p.any_legal_ep(sq)) p.ep_ = static_cast<std::int8_t>(sq);
  }
  p.halfmove_ = static_cast<std::uint16_t>(std::min(half, 65535));
  p.fullmove_ = static_cast<std::uint16_t>(std::min(full, 65535));
  p.key_ = p.compute_key();
  *this = p;
}

std::string Position::fen() const {
  std::string s;
  for (int rank = 7; rank >= 0; --rank) {
    int empty = 0;
    for (int file = 0; file < 8; ++file) {
      const int sq = make_square(file, rank);
      if (type_on(sq) == kNoPieceType) {
        ++empty;
        continue;
      }
      if (empty) s += static_cast<char>('0' + empty);
      empty = 0;
      const char ch = kPieceChars[type_on(sq)];
      s += color_on(sq) == kWhite ? static_cast<char>(ch - 32) : ch;
    }
    if (empty) s += static_cast<char>('0' + empty);
    if (rank) s += '/';
  }
  s += side_ == kWhite ? " w " : " b ";
  if (!castling_) s += '-';
  if (castling_ & kWhiteOO) s += 'K';
  if (castling_ & kWhiteOOO) s += 'Q';
  if (castling_ & kBlackOO) s += 'k';
  if (castling_ & kBlackOOO) s += 'q';
  s += ' ';
  if (ep_ >= 0) {
    s += static_cast<char>('a' + file_of(ep_));
    s += static_cast<char>('1' + rank_of(ep_));
  } else {
    s += '-';
  }
  s += ' ' + std::to_string(halfmove_) + ' ' + std::to_string(fullmove_);
  return s;
}

std::string Position::to_uci(Move m) {
  std::string s;
  s += static_cast<char>('a' + file_of(m.from));
  s += static_cast<char>('1' + rank_of(m.from));
  s += static_cast<char>('a' + file_of(m.to));
  s += static_cast<char>('1' + rank_of(m.to));
  if (m.promo != kNoPieceType) s += kPieceChars[m.promo];
  return s;
}

bool Position::parse_uci(const std::string& s, Move& out) {
  if (s.size() != 4 && s.size() != 5) return false;
  for (int i : {0, 2})
    if (s[i] < 'a' || s[i] > 'h' || s[i + 1] < '1' || s[i + 1] > '8') return false;
  out.from = static_cast<std::uint8_t>(make_square(s[0] - 'a', s[1] - '1'));
  out.to = static_cast<std::uint8_t>(make_square(s[2] - 'a', s[3] - '1'));
  out.promo = kNoPieceType;
  if (s.size() == 5) {
    switch (s[4]) {
      case 'n': out.promo = kKnight; break;
      case 'b': out.promo = kBishop; break;
      case 'r': out.promo = kRook; break;
      case 'q': out.promo = kQueen; break;
      default: return false;
    }
  }
  return true;
}

std::uint64_t perft(const Position& pos, int depth) {
  if (depth <= 0) return 1;
  MoveList ml;
  pos.legal_moves(ml);
  if (depth == 1) return static_cast<std::uint64_t>(ml.size);  // bulk count at the frontier
  std::uint64_t n = 0;
  for (const Move& m : ml) {
    Position child = pos;
    child.play(m);
    n += perft(child, depth - 1);
  }
  return n;
}

}  // namespace meeple::chess
