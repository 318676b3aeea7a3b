// Python bindings of the chess rules -> meeple_native._core.chess (a submodule,
// re-exported as meeple_native.chess): Board, perft, the input planes and the
// 4,672-move policy encoding. Search and self-play: bind_search.cpp.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "chess/actions.hpp"
#include "chess/bind_parts.hpp"
#include "chess/game.hpp"
#include "chess/position.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace meeple::chess {

void bind_search(nb::module_& m);  // chess/bind_search.cpp

namespace {

std::string board_text(const Position& p) {
  std::string s;
  constexpr char kChars[] = "pnbrqk";
  for (int rank = 7; rank >= 0; --rank) {
    for (int file = 0; file < 8; ++file) {
      const int sq = make_square(file, rank);
      char c = '.';
      if (p.type_on(sq) != kNoPieceType) {
        c = kChars[p.type_on(sq)];
        if (p.color_on(sq) == kWhite) c = static_cast<char>(c - 32);
      }
      s += c;
      s += file < 7 ? ' ' : '\n';
    }
  }
  return s;
}

// The legal move `uci` names in `g`; ValueError if malformed or illegal.
Move legal_move(const Game& g, const std::string& uci) {
  Move m;
  if (!Position::parse_uci(uci, m))
    throw nb::value_error(("malformed UCI move '" + uci + "' (expected e.g. 'e2e4' or 'e7e8q')").c_str());
  MoveList ml;
  g.position().legal_moves(ml);
  for (const Move& l : ml)
    if (l == m) return m;
  throw nb::value_error(("illegal move '" + uci + "' in " + g.position().fen()).c_str());
}

void check_not_over(const Game& g) {
  const Termination t = g.termination();
  if (t != Termination::kNone)
    throw nb::value_error((std::string("the game is over (") + termination_name(t) + ") in " + g.position().fen()).c_str());
}

const char* result_text(const Game& g) {
  switch (g.termination()) {
    case Termination::kNone: return "*";
    case Termination::kCheckmate: return g.to_play() == kWhite ? "0-1" : "1-0";
    default: return "1/2-1/2";
  }
}

}  // namespace

void register_chess(nb::module_& parent) {
  nb::module_ m = parent.def_submodule(
      "chess", "Chess rules on bitboards, AlphaZero input planes and 4,672-move policy encoding; docs/chess.md.");
  m.attr("NUM_ACTIONS") = kNumActions;
  m.attr("NUM_PLANES") = kNumPlanes;
  m.attr("PLANES_SHAPE") = nb::make_tuple(kNumPlanes, 8, 8);
  m.attr("START_FEN") = kStartFen;

  m.def(
      "perft",
      [](const std::string& fen, int depth) {
        if (depth < 0) throw nb::value_error(("depth must be >= 0, got " + std::to_string(depth)).c_str());
        const Position p = Position::from_fen(fen);
        nb::gil_scoped_release release;
        return perft(p, depth);
      },
      "fen"_a, "depth"_a,
      "Leaf nodes of the legal move tree of `fen` at `depth` plies (game-ending draw rules are not applied, "
      "as usual for perft). Releases the GIL.");

  nb::class_<Game>(m, "Board",
                   "A chess game from a start position (default: the initial position). Draws by the 50-move "
                   "rule and threefold repetition end the game at once; see docs/chess.md.")
      .def(
          "__init__",
          [](Game* self, std::optional<std::string> fen) { new (self) Game(Game::from_fen(fen ? *fen : kStartFen)); },
          "fen"_a.none() = nb::none())
      .def("fen", [](const Game& g) { return g.position().fen(); }, "FEN; the en passant square only when a capture there is legal.")
      .def_prop_ro("to_play", &Game::to_play, "0 = white, 1 = black to move.")
      .def_prop_ro("halfmove_clock", [](const Game& g) { return g.position().halfmove_clock(); })
      .def_prop_ro("fullmove_number", [](const Game& g) { return g.position().fullmove_number(); })
      .def_prop_ro("ply", &Game::ply, "Moves played since the start position of this Board.")
      .def_prop_ro("repetitions", &Game::repetitions,
                   "Earlier occurrences of the current position in this game (2 = threefold repetition).")
      .def(
          "legal_moves",
          [](const Game& g) {
            MoveList ml;
            g.position().legal_moves(ml);
            std::vector<std::string> out;
            for (const Move& mv : ml) out.push_back(Position::to_uci(mv));
            return out;
          },
          "Chess-legal moves as UCI strings (also in positions drawn by rule).")
      .def(
          "legal_actions",
          [](const Game& g) {
            std::vector<int> out(MoveList::kCapacity);
            out.resize(g.legal_moves(out.data()));
            return out;
          },
          "Policy indices (0..4671) of the legal moves, in legal_moves() order.")
      .def(
          "push",
          [](Game& g, const std::string& uci) {
            check_not_over(g);
            g.play_move(legal_move(g, uci));
          },
          "move"_a, "Play a UCI move; ValueError if malformed, illegal, or the game is over.")
      .def(
          "push_action",
          [](Game& g, int action) {
            check_not_over(g);
            Move mv;
            if (!action_to_move(action, g.position(), mv))
              throw nb::value_error(("action " + std::to_string(action) + " is not a move on the board").c_str());
            g.play_move(legal_move(g, Position::to_uci(mv)));
          },
          "action"_a, "Play the move with this policy index; ValueError if illegal or the game is over.")
      .def("is_check", [](const Game& g) { return g.position().in_check(); })
      .def("is_checkmate", [](const Game& g) { return g.position().in_check() && !g.position().has_legal_move(); })
      .def(
          "is_stalemate", [](const Game& g) { return !g.position().in_check() && !g.position().has_legal_move(); },
          "No legal move and not in check (also when termination() reports insufficient material first).")
      .def("is_insufficient_material", [](const Game& g) { return g.position().insufficient_material(); })
      .def(
          "is_fifty_moves",
          [](const Game& g) { return g.position().halfmove_clock() >= 100 && g.position().has_legal_move(); },
          "Half-move clock >= 100 and the side to move has a legal move (python-chess's is_fifty_moves).")
      .def(
          "is_repetition", [](const Game& g) { return g.repetitions() >= 2; },
          "The current position occurred at least three times (python-chess's is_repetition(3)).")
      .def("is_game_over", &Game::is_terminal)
      .def(
          "termination",
          [](const Game& g) -> std::optional<std::string> {
            const Termination t = g.termination();
            if (t == Termination::kNone) return std::nullopt;
            return std::string(termination_name(t));
          },
          "None while the game goes on, else 'checkmate', 'stalemate', 'insufficient_material', "
          "'fifty_moves' or 'threefold_repetition'.")
      .def("result", &result_text, "'1-0', '0-1', '1/2-1/2' or '*' (game not over).")
      .def("key", &Game::position_key, "Zobrist key of the position (pieces, side, castling, legal en passant).")
      .def("history_key", &Game::key,
           "Key of the whole network input (the last 8 positions, repetitions, clocks); the search cache key.")
      .def("copy", [](const Game& g) { return Game(g); })
      .def("__copy__", [](const Game& g) { return Game(g); })
      .def("__deepcopy__", [](const Game& g, nb::handle) { return Game(g); }, "memo"_a)
      .def("perft", [](const Game& g, int depth) {
            if (depth < 0) throw nb::value_error(("depth must be >= 0, got " + std::to_string(depth)).c_str());
            nb::gil_scoped_release release;
            return perft(g.position(), depth);
          }, "depth"_a, "perft of the current position (releases the GIL).")
      .def(
          "encode",
          [](const Game& g, nb::handle out) {
            float* p = bind::out_buffer<float>(out, {static_cast<size_t>(kNumPlanes), 8, 8}, "out", "float32");
            g.encode(p);
          },
          "out"_a,
          "Write the AlphaZero input planes (119, 8, 8) float32 into `out` (zero copy; layout in docs/chess.md).")
      .def(
          "legal_mask",
          [](const Game& g, nb::handle out) {
            bool* p = bind::out_buffer<bool>(out, {static_cast<size_t>(kNumActions)}, "out", "bool");
            std::fill(p, p + kNumActions, false);
            int acts[MoveList::kCapacity];
            const int n = g.legal_moves(acts);
            for (int i = 0; i < n; ++i) p[acts[i]] = true;
          },
          "out"_a, "Write the legal-move mask (4672,) bool into `out` (zero copy).")
      .def(
          "action_to_uci",
          [](const Game& g, int action) {
            Move mv;
            if (!action_to_move(action, g.position(), mv))
              throw nb::value_error(("action " + std::to_string(action) + " is not a move on the board").c_str());
            return Position::to_uci(mv);
          },
          "action"_a, "The move a policy index stands for here (legal or not) as UCI.")
      .def(
          "uci_to_action",
          [](const Game& g, const std::string& uci) {
            Move mv;
            if (!Position::parse_uci(uci, mv))
              throw nb::value_error(("malformed UCI move '" + uci + "'").c_str());
            const int a = move_to_action(mv, g.position().side_to_move());
            if (a < 0) throw nb::value_error(("'" + uci + "' is no chess move shape (queen-like, knight, underpromotion)").c_str());
            return a;
          },
          "move"_a, "Policy index of a UCI move for the side to move (the move need not be legal).")
      .def("__str__", [](const Game& g) { return board_text(g.position()); })
      .def("__repr__", [](const Game& g) { return "Board('" + g.position().fen() + "')"; });

  bind_search(m);
}

}  // namespace meeple::chess
