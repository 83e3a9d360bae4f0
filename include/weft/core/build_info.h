// What this build of Weft is: its version and the commit it was built from, for a program
// (`weft --version`, `weft info`, the benchmarks' results, Python's weft.build_commit) to
// record beside what it measured. The commit is taken when the library is built, not when a
// program runs, so a binary run from another checkout still names its own source.
#pragma once

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

// The project version (CMakeLists.txt's project(VERSION)), e.g. "0.1.0".
const char* version();
// `git describe --always --dirty` of the source tree at build time, e.g. "71aa130" or
// "71aa130-dirty" (uncommitted changes to tracked files); "unknown" when built outside a git
// checkout (a tarball) or without git.
const char* build_commit();

}  // namespace weft
WEFT_API_END
