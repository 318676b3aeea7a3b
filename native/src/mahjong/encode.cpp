// Placeholder until the encoder lands (issue #5): fails loudly rather than encode nothing.
#include "encode.hpp"

#include <stdexcept>

namespace meeple::mj {
void encode_public(const Game&, int, float*) { throw std::logic_error("encode_public: not built yet"); }
void encode_oracle(const Game&, int, float*) { throw std::logic_error("encode_oracle: not built yet"); }
}  // namespace meeple::mj
