#include "bind_parts.hpp"

namespace meeple::mj {
void register_bots(nanobind::module_&) {}
}  // namespace meeple::mj
