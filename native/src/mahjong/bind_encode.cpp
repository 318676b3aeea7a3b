#include "bind_parts.hpp"

namespace meeple::mj {
void register_encode(nanobind::module_&) {}
}  // namespace meeple::mj
