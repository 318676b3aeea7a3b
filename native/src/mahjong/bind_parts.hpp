// Registration of the env-side bindings, one file each, into meeple_native.mahjong.
#pragma once

#include <nanobind/nanobind.h>

namespace meeple::mj {
void register_encode(nanobind::module_& m);  // bind_encode.cpp: encoders, suit permutation
void register_bots(nanobind::module_& m);    // bind_bots.cpp: bots, bot-only matches
void register_batch(nanobind::module_& m);   // bind_batch.cpp: action space, batch simulator
}  // namespace meeple::mj
