// C++ check of the chess core for sanitizers (AddressSanitizer/UBSan): plays
// seeded random games through the search interface (actions, encode, key,
// termination) and checks invariants the Python tests cannot see:
//   * the incrementally updated Zobrist key equals the key of the position
//     re-read from its own FEN;
//   * every legal action is unique and decodes to the move it came from;
//   * planes are 0/1 (piece and repetition planes) and every piece is on exactly one plane;
//   * perft of the published positions at small depths.
// Build: cmake -S native -B /tmp/asan -DMEEPLE_NATIVE_BUILD_TESTS=ON
//   -DMEEPLE_NATIVE_SANITIZE=address ... && cmake --build /tmp/asan --target chess_random_games
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

#include "chess/game.hpp"
#include "mcts.hpp"

using namespace meeple::chess;

namespace {

int failures = 0;
void check(bool ok, const char* what, const Game& g) {
  if (!ok && failures++ < 20) std::printf("FAIL %s at %s\n", what, g.position().fen().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const int games = argc > 1 ? std::atoi(argv[1]) : 200;
  struct Case {
    const char* fen;
    int depth;
    unsigned long long nodes;
  } cases[] = {
      {kStartFen, 4, 197281},
      {"r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1", 3, 97862},
      {"8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", 4, 43238},
      {"r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1", 3, 9467},
      {"rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8", 3, 62379},
  };
  for (const auto& c : cases) {
    const unsigned long long n = perft(Position::from_fen(c.fen), c.depth);
    if (n != c.nodes) {
      std::printf("FAIL perft %s depth %d: %llu != %llu\n", c.fen, c.depth, n, c.nodes);
      ++failures;
    }
  }
  meeple::mcts::Rng rng(42);
  std::vector<float> planes(kNumPlanes * kPlaneSize);
  long plies = 0;
  for (int gi = 0; gi < games; ++gi) {
    Game g;
    while (!g.is_terminal()) {
      int actions[MoveList::kCapacity];
      const int n = g.legal_moves(actions);
      MoveList ml;
      g.position().legal_moves(ml);
      check(n == ml.size && n > 0, "legal count", g);
      std::set<int> seen(actions, actions + n);
      check(static_cast<int>(seen.size()) == n, "unique actions", g);
      for (int i = 0; i < n; ++i) {
        Move m;
        check(action_to_move(actions[i], g.position(), m) && m == ml.moves[i], "action round trip", g);
      }
      check(Position::from_fen(g.position().fen()).key() == g.position_key(), "incremental key", g);
      g.encode(planes.data());
      int pieces_on_planes = 0;
      for (int p = 0; p < 12; ++p)
        for (int s = 0; s < 64; ++s) pieces_on_planes += planes[p * 64 + s] == 1.0f;
      check(pieces_on_planes == popcount(g.position().occupied()), "piece planes", g);
      for (int t = 0; t < kHistory; ++t)
        for (int p = 0; p < kPlanesPerPosition; ++p)
          for (int s = 0; s < 64; ++s) {
            const float v = planes[(t * kPlanesPerPosition + p) * 64 + s];
            check(v == 0.0f || v == 1.0f, "binary planes", g);
          }
      g.play(actions[rng.below(n)]);
      ++plies;
    }
  }
  std::printf("%d games, %ld plies, %d failures\n", games, plies, failures);
  return failures ? 1 : 0;
}
