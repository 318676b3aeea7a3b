#include "bind_parts.hpp"

namespace meeple::mj {
void register_batch(nanobind::module_&) {}
}  // namespace meeple::mj
