// The targets linked into the replay executable (fuzz_support.cpp fills it at start-up).
#pragma once

#include <map>
#include <string>

#include "fuzz_target.h"

namespace weft::fuzz {

std::map<std::string, TargetBody>& registered_targets();

}  // namespace weft::fuzz
