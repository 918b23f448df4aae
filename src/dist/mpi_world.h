// Internal to src/dist: MPI's world where init() started it.
#pragma once

#include "emo/dist/dist.h"

namespace emo::dist::detail {
// Null unless init() started MPI.
Comm* mpi_world();
}  // namespace emo::dist::detail
