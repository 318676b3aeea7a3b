// Registration of the env-side bindings, one file each, into meeple_native.mahjong.
#pragma once

#include <nanobind/nanobind.h>

#include "bots.hpp"

namespace meeple::mj {
void register_encode(nanobind::module_& m);  // bind_encode.cpp: encoders, suit permutation
void register_bots(nanobind::module_& m);    // bind_bots.cpp: bots, bot-only matches
void register_batch(nanobind::module_& m);   // bind_batch.cpp: action space, batch simulator

// A match's per-seat statistics as a dict (bind_bots.cpp), shared by play_bots and BatchSim.
nanobind::dict match_to_dict(const BotMatch& m);
}  // namespace meeple::mj
