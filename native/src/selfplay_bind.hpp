// Binding parts shared by the games' SelfPlay classes (Connect Four: search_bindings.cpp,
// chess: chess/bind_selfplay.cpp), whose Python objects hold a SelfPlayEngine as `engine`.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <vector>

namespace meeple::selfplay_bind {

namespace nb = nanobind;

// A 0/1 byte vector as a numpy bool array that owns it (no copy).
inline nb::ndarray<nb::numpy, bool> bool_array(std::vector<std::uint8_t>&& v,
                                               std::initializer_list<std::size_t> shape) {
  auto* p = new std::vector<std::uint8_t>(std::move(v));
  nb::capsule owner(p, [](void* q) noexcept { delete static_cast<std::vector<std::uint8_t>*>(q); });
  return nb::ndarray<nb::numpy, bool>(reinterpret_cast<bool*>(p->data()), shape, owner);
}

// SelfPlay.next_game_id: read, and set between runs to resume a run's games exactly.
template <class Class>
void def_next_game_id(Class& cls) {
  using Py = typename Class::Type;
  cls.def_prop_rw(
      "next_game_id", [](const Py& s) { return s.engine->next_game_id(); },
      [](Py& s, std::uint64_t id) {
        try {
          s.engine->set_next_game_id(id);
        } catch (const std::runtime_error& e) {
          throw nb::value_error(e.what());
        }
      },
      "Id of the next game (its random stream derives from seed and id); set it to resume a run exactly.");
}

}  // namespace meeple::selfplay_bind
