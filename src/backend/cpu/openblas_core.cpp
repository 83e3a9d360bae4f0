// Which kernel set OpenBLAS runs on this CPU, and whether it is an old fallback
// (weft/backend/cpu.h): OpenBLAS names its kernel sets after CPUs, and one that predates AVX2
// on a CPU with AVX2 means it did not recognise the CPU.
#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "weft/backend/cpu.h"

namespace weft {
namespace {

// OpenBLAS's x86-64 kernel sets that use AVX2 (and FMA) or AVX-512.
constexpr const char* kVectorCores[] = {"haswell",        "zen",      "skylakex", "cooperlake",
                                        "sapphirerapids", "excavator"};

std::string lower(std::string text) {
  for (char& ch : text) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return text;
}

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

}  // namespace

OpenBlasCore openblas_core() {
  OpenBlasCore core;
  const char* name = openblas_get_corename();
  core.name = name != nullptr ? name : "unknown";
  const std::string key = lower(core.name);
  const bool vector_core = std::any_of(std::begin(kVectorCores), std::end(kVectorCores),
                                       [&](const char* known) { return key == known; });
  core.fallback = cpu_has_avx2() && !vector_core;
  if (core.fallback)
    core.remedy = cpu_has_avx512() ? "OPENBLAS_CORETYPE=SkylakeX" : "OPENBLAS_CORETYPE=Haswell";
  return core;
}

}  // namespace weft
