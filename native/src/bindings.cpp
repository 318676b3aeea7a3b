// Python bindings (nanobind) for meeple_native._core.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "connect4.hpp"
#include "solver.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using meeple::c4::Connect4;
using meeple::c4::Solver;
namespace c4 = meeple::c4;

namespace {

constexpr const char* kObsShape = "(3, 6, 7)";
static_assert(c4::kNumPlanes == 3 && c4::kHeight == 6 && c4::kWidth == 7, "update kObsShape");

Connect4 parse_moves(const std::string& moves) {
  try {
    return Connect4::from_moves(moves);
  } catch (const std::invalid_argument& e) {
    throw nb::value_error(e.what());
  }
}

// Writes the observation planes of `s` into `out`, a writable C-contiguous
// float32 CPU array of shape (kNumPlanes, kHeight, kWidth).
void encode_into(const Connect4& s, nb::handle out) {
  nb::ndarray<nb::ro> view;
  if (!nb::try_cast(out, view)) {
    throw nb::type_error((std::string("encode(out): out must be a numpy float32 array of shape ") +
                          kObsShape + ", got " + nb::type_name(out.type()).c_str())
                             .c_str());
  }
  if (view.device_type() != nb::device::cpu::value) {
    throw nb::value_error("encode(out): out must be a CPU array");
  }
  if (view.dtype() != nb::dtype<float>()) {
    nb::object dt = nb::getattr(out, "dtype", nb::none());
    throw nb::type_error((std::string("encode(out): out must have dtype float32, got ") +
                          nb::str(dt).c_str())
                             .c_str());
  }
  const bool shape_ok = view.ndim() == 3 && view.shape(0) == static_cast<size_t>(c4::kNumPlanes) &&
                        view.shape(1) == static_cast<size_t>(c4::kHeight) &&
                        view.shape(2) == static_cast<size_t>(c4::kWidth);
  if (!shape_ok) {
    std::string got = "(";
    for (size_t i = 0; i < view.ndim(); ++i) {
      got += std::to_string(view.shape(i));
      if (i + 1 < view.ndim() || view.ndim() == 1) got += view.ndim() == 1 ? "," : ", ";
    }
    got += ")";
    throw nb::value_error(
        (std::string("encode(out): out must have shape ") + kObsShape + ", got " + got).c_str());
  }
  const bool contiguous = view.stride(2) == 1 && view.stride(1) == c4::kWidth &&
                          view.stride(0) == c4::kWidth * c4::kHeight;
  if (!contiguous) {
    throw nb::value_error("encode(out): out must be C-contiguous (use np.ascontiguousarray or a fresh "
                          "np.empty((3, 6, 7), np.float32))");
  }
  nb::ndarray<float, nb::device::cpu> writable;
  if (!nb::try_cast(out, writable)) {
    throw nb::value_error("encode(out): out is read-only");
  }
  s.encode(writable.data());
}

std::string repr(const Connect4& s) {
  std::string status;
  switch (s.status()) {
    case c4::Status::kOngoing: status = "ongoing"; break;
    case c4::Status::kFirstWon: status = "X won"; break;
    case c4::Status::kSecondWon: status = "O won"; break;
    case c4::Status::kDraw: status = "draw"; break;
  }
  return "Connect4(moves_played=" + std::to_string(s.moves_played()) + ", to_play='" +
         (s.to_play() == 0 ? "X" : "O") + "', status='" + status + "')\n" + s.board_string();
}

// A Solver usable from several Python threads: the search runs without the
// GIL, one call at a time per Solver (the transposition table is not shared-safe).
struct PySolver {
  explicit PySolver(int tt_log2) : solver(tt_log2) {}
  Solver solver;
  std::mutex mu;

  template <class F>
  auto run(F&& f) {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu);
    return f(solver);
  }
};

// Per-thread solver used by the module-level functions (TT kept between calls).
Solver& thread_solver() {
  thread_local Solver solver(23);
  return solver;
}

template <class F>
auto run_default(F&& f) {
  nb::gil_scoped_release release;
  return f(thread_solver());
}

using Scores = std::array<std::optional<int>, c4::kWidth>;

// Inverse of encode: the position whose planes are `obj` (3, 6, 7), side to move's view.
Connect4 from_planes(nb::handle obj) {
  nb::ndarray<const float, nb::c_contig, nb::device::cpu> a;
  if (!nb::try_cast(obj, a, false)) {
    nb::object np = nb::module_::import_("numpy");
    nb::object conv = np.attr("ascontiguousarray")(obj, "dtype"_a = np.attr("float32"));
    if (!nb::try_cast(conv, a, false)) throw nb::type_error("from_planes: planes must be an array of shape (3, 6, 7)");
  }
  if (a.ndim() != 3 || a.shape(0) != static_cast<size_t>(c4::kNumPlanes) ||
      a.shape(1) != static_cast<size_t>(c4::kHeight) || a.shape(2) != static_cast<size_t>(c4::kWidth)) {
    throw nb::value_error((std::string("from_planes: planes must have shape ") + kObsShape).c_str());
  }
  const float* p = a.data();
  constexpr int kPlane = c4::kHeight * c4::kWidth;
  c4::Bitboard current = 0, mask = 0;
  for (int row = 0; row < c4::kHeight; ++row) {
    for (int col = 0; col < c4::kWidth; ++col) {
      const int i = row * c4::kWidth + col;
      const bool me = p[i] > 0.5f, opp = p[kPlane + i] > 0.5f;
      if (me && opp)
        throw nb::value_error(("from_planes: row " + std::to_string(row) + ", column " + std::to_string(col) +
                               " holds stones of both players").c_str());
      const c4::Bitboard b = c4::cell_bit(col, c4::kHeight - 1 - row);
      if (me) current |= b;
      if (me || opp) mask |= b;
    }
  }
  const int moves = c4::popcount(mask);
  const int own = c4::popcount(current);
  const bool counts_ok = (moves % 2 == 0) ? (2 * own == moves) : (2 * own + 1 == moves);
  if (((mask + c4::kBottomMask) & c4::kBoardMask & mask) || !counts_ok) {
    throw nb::value_error("from_planes: not a reachable position (floating stones, or stone counts that do not "
                          "match the side to move)");
  }
  return Connect4::from_bitboards(current, mask, moves);
}

}  // namespace

void bind_search(nb::module_& m);
void bind_shm(nb::module_& parent);  // shm/bindings.cpp
namespace meeple::mj {
void register_mahjong(nb::module_& parent);  // src/mahjong/bindings.cpp
}
namespace meeple::chess {
void register_chess(nb::module_& parent);  // src/chess/bindings.cpp
}

NB_MODULE(_core, m) {
  m.doc() = "meeple native engines: Connect Four rules and an exact Connect Four solver.";
  m.attr("WIDTH") = c4::kWidth;
  m.attr("HEIGHT") = c4::kHeight;
  m.attr("NUM_PLANES") = c4::kNumPlanes;
  m.attr("OBS_SHAPE") = nb::make_tuple(c4::kNumPlanes, c4::kHeight, c4::kWidth);

  nb::class_<Connect4>(m, "Connect4",
                       "Connect Four, 7 columns x 6 rows, on bitboards. Columns are 0-based in every "
                       "method except from_moves (1-based digits, as in Pascal Pons' benchmark files).")
      .def(nb::init<>(), "The empty board; the first player ('X') to move.")
      .def_static("from_moves", &parse_moves, "moves"_a,
                  "Position after the 1-based column digits in `moves` (e.g. '4453'). Raises "
                  "ValueError naming the bad character, full column or move after the end, and its index.")
      .def_static("from_planes", &from_planes, "planes"_a,
                  "Position whose observation planes (3, 6, 7) are `planes` (inverse of encode). ValueError "
                  "if they do not describe a reachable position.")
      .def("legal_moves",
           [](const Connect4& s) {
             int buf[c4::kNumActions];
             const int n = s.legal_moves(buf);
             return std::vector<int>(buf, buf + n);
           },
           "Legal columns (0-based, increasing); empty once the game is over.")
      .def("legal_mask", &Connect4::legal_mask, "Bit c set iff column c is legal.")
      .def("is_legal", &Connect4::is_legal, "col"_a)
      .def("play",
           [](Connect4& s, int col) {
             try {
               s.play_checked(col);
             } catch (const std::invalid_argument& e) {
               throw nb::value_error(e.what());
             }
           },
           "col"_a, "Play a 0-based column. ValueError if out of range, full, or the game is over.")
      .def("is_winning_move",
           [](const Connect4& s, int col) { return s.is_legal(col) && s.is_winning_move(col); },
           "col"_a, "True if playing this (legal) column wins at once.")
      .def("is_terminal", &Connect4::is_terminal)
      .def("winner",
           [](const Connect4& s) -> std::optional<int> {
             const int w = s.winner();
             if (w < 0) return std::nullopt;
             return w;
           },
           "0 (first player) or 1 (second player) if someone has four in a row, else None.")
      .def("result",
           [](const Connect4& s) -> std::optional<int> {
             if (!s.is_terminal()) return std::nullopt;
             return s.terminal_value();
           },
           "From the side to move's view: None while the game goes on, -1 if the opponent "
           "has just won, 0 for a draw (full board).")
      .def_prop_ro("moves_played", &Connect4::moves_played, "Number of stones on the board.")
      .def_prop_ro("to_play", &Connect4::to_play, "0 if the first player is to move, else 1.")
      .def("height", [](const Connect4& s, int col) {
             if (col < 0 || col >= c4::kWidth)
               throw nb::value_error(("column " + std::to_string(col) + " is out of range: expected 0..6").c_str());
             return s.height(col);
           }, "col"_a, "Number of stones in a column.")
      .def("key", &Connect4::key,
           "Unique position key (< 2**49): equal keys <=> same stones on the board.")
      .def("encode", &encode_into, "out"_a.none(),
           "Write the observation planes (side to move's view) into `out`, a writable C-contiguous "
           "float32 array of shape (3, 6, 7): [own stones, opponent stones, ones]; row 0 is the top row.")
      .def("copy", [](const Connect4& s) { return s; })
      .def("__copy__", [](const Connect4& s) { return s; })
      .def("__deepcopy__", [](const Connect4& s, nb::handle) { return s; }, "memo"_a)
      .def("__eq__", [](const Connect4& a, const Connect4& b) { return a == b; })
      .def("__eq__", [](const Connect4&, nb::handle) { return false; })
      .def("__hash__", [](const Connect4& s) { return s.key(); })
      .def("__getstate__",
           [](const Connect4& s) { return std::make_tuple(s.current(), s.mask(), s.moves_played()); })
      .def("__setstate__",
           [](Connect4& s, const std::tuple<std::uint64_t, std::uint64_t, int>& st) {
             const auto [cur, mask, moves] = st;
             if ((mask & ~c4::kBoardMask) || (cur & ~mask) || c4::popcount(mask) != moves ||
                 ((mask + c4::kBottomMask) & c4::kBoardMask & mask)) {
               throw nb::value_error("Connect4.__setstate__: inconsistent state");
             }
             new (&s) Connect4(Connect4::from_bitboards(cur, mask, moves));
           })
      .def("__repr__", &repr);

  nb::class_<PySolver>(m, "Solver",
                       "Exact solver; keeps its transposition table between calls. Scores follow Pons: "
                       "from the side to move's view, >0 win, 0 draw, <0 loss, magnitude 22 minus the "
                       "winner's stone count at the end. The search runs without the GIL.")
      .def(nb::init<int>(), "tt_log2"_a = 23,
           "Transposition table of the smallest prime >= 2**tt_log2 slots, 5 bytes each (18..30).")
      .def("solve", [](PySolver& ps, const std::string& moves) {
             const Connect4 pos = parse_moves(moves);
             return ps.run([&](Solver& s) { return s.solve(pos); });
           }, "moves"_a, "Score of the position after `moves` (1-based digits).")
      .def("solve", [](PySolver& ps, const Connect4& pos) {
             return ps.run([&](Solver& s) { return s.solve(pos); });
           }, "position"_a)
      .def("analyze", [](PySolver& ps, const std::string& moves) {
             const Connect4 pos = parse_moves(moves);
             return ps.run([&](Solver& s) { return s.analyze(pos); });
           }, "moves"_a, "Score of each of the 7 columns for the side to move (None: illegal).")
      .def("analyze", [](PySolver& ps, const Connect4& pos) {
             return ps.run([&](Solver& s) { return s.analyze(pos); });
           }, "position"_a)
      .def("best_moves", [](PySolver& ps, const std::string& moves) {
             const Connect4 pos = parse_moves(moves);
             return ps.run([&](Solver& s) { return s.best_moves(pos); });
           }, "moves"_a, "Optimal columns (0-based, increasing); empty if the game is over.")
      .def("best_moves", [](PySolver& ps, const Connect4& pos) {
             return ps.run([&](Solver& s) { return s.best_moves(pos); });
           }, "position"_a)
      .def("reset", [](PySolver& ps) { ps.run([](Solver& s) { s.reset(); }); },
           "Clear the transposition table.")
      .def_prop_ro("node_count", [](PySolver& ps) { return ps.run([](Solver& s) { return s.node_count(); }); },
                   "Search nodes visited since construction.")
      .def_prop_ro("tt_size", [](PySolver& ps) { return ps.solver.tt_size(); })
      .def_prop_ro("tt_bytes", [](PySolver& ps) { return ps.solver.tt_bytes(); });

  m.def("solve", [](const std::string& moves) {
        const Connect4 pos = parse_moves(moves);
        return run_default([&](Solver& s) { return s.solve(pos); });
      }, "moves"_a,
      "Exact score of the position after `moves` (1-based digits) with a per-thread Solver.");
  m.def("solve", [](const Connect4& pos) { return run_default([&](Solver& s) { return s.solve(pos); }); },
        "position"_a);
  m.def("analyze", [](const std::string& moves) {
        const Connect4 pos = parse_moves(moves);
        return run_default([&](Solver& s) { return s.analyze(pos); });
      }, "moves"_a);
  m.def("analyze", [](const Connect4& pos) { return run_default([&](Solver& s) { return s.analyze(pos); }); },
        "position"_a);
  m.def("best_moves", [](const std::string& moves) {
        const Connect4 pos = parse_moves(moves);
        return run_default([&](Solver& s) { return s.best_moves(pos); });
      }, "moves"_a);
  m.def("best_moves",
        [](const Connect4& pos) { return run_default([&](Solver& s) { return s.best_moves(pos); }); },
        "position"_a);

  bind_search(m);
  bind_shm(m);
  meeple::mj::register_mahjong(m);  // submodule meeple_native._core.mahjong
  meeple::chess::register_chess(m);  // submodule meeple_native._core.chess
}
