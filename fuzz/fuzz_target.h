// One fuzz target = one file in fuzz/ that says what it feeds to which reader:
//
//   WEFT_FUZZ_TARGET(sst_tree) { io::parse_sst_tree(input); }
//
// Built with clang and WEFT_BUILD_FUZZERS=ON, each file becomes a libFuzzer executable
// (fuzz_<name>); in every build with tests, all of them are linked into weft_fuzz_replay, which
// runs a target over its regression inputs (fuzz/corpus/<name>/) as a ctest. Either way the
// body runs under run_guarded: a weft::Error is the expected answer to bad input; any other
// exception (std::bad_alloc, a JSON library exception, std::out_of_range ...) is a bug and
// aborts with its message, so the fuzzer and the replay both report it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace weft::fuzz {

using TargetBody = void (*)(std::string_view input);

// Runs `body` on the bytes; returns 0 (libFuzzer's "keep going") or aborts on a non-weft error.
int run_guarded(const char* name, TargetBody body, const std::uint8_t* data, std::size_t size);

// For the replay executable: the targets linked into it, by name.
bool register_target(const char* name, TargetBody body);

// The input as a file (an anonymous in-memory file, /proc/self/fd/N), for readers that take a
// path; removed with the object.
class MemoryFile {
 public:
  explicit MemoryFile(std::string_view contents);
  ~MemoryFile();
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace weft::fuzz

#if defined(WEFT_LIBFUZZER)
#define WEFT_FUZZ_TARGET(name)                                                        \
  static void weft_fuzz_##name(std::string_view input);                               \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    return ::weft::fuzz::run_guarded(#name, &weft_fuzz_##name, data, size);           \
  }                                                                                   \
  static void weft_fuzz_##name(std::string_view input)
#else
#define WEFT_FUZZ_TARGET(name)                                     \
  static void weft_fuzz_##name(std::string_view input);            \
  [[maybe_unused]] static const bool weft_fuzz_registered_##name = \
      ::weft::fuzz::register_target(#name, &weft_fuzz_##name);     \
  static void weft_fuzz_##name(std::string_view input)
#endif
