// The guard around every fuzz target, the in-memory file and the replay registry (see
// fuzz_target.h).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>

#include "fuzz_target.h"
#include "replay_registry.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"

namespace weft::fuzz {

int run_guarded(const char* name, TargetBody body, const std::uint8_t* data, std::size_t size) {
  // One GEMM provider for every product: a fuzz run is deterministic, and no input is charged
  // for timing a new shape class (gemm_selection.h) against the 1 s limit.
  static const bool one_provider = [] {
    set_gemm_provider(available_gemm_providers().front());
    return true;
  }();
  (void)one_provider;
  try {
    body(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const Error&) {
    // The answer bad input should get.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz target %s: not a weft::Error: %s\n", name, e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz target %s: an exception that is not a std::exception\n", name);
    std::abort();
  }
  return 0;
}

std::map<std::string, TargetBody>& registered_targets() {
  static std::map<std::string, TargetBody> targets;
  return targets;
}

bool register_target(const char* name, TargetBody body) {
  registered_targets().emplace(name, body);
  return true;
}

MemoryFile::MemoryFile(std::string_view contents) {
  fd_ = ::memfd_create("weft-fuzz", 0);
  if (fd_ < 0) {
    std::perror("memfd_create");
    std::abort();
  }
  for (std::size_t done = 0; done < contents.size();) {
    const ssize_t n = ::write(fd_, contents.data() + done, contents.size() - done);
    if (n <= 0) {
      std::perror("write");
      std::abort();
    }
    done += std::size_t(n);
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

MemoryFile::~MemoryFile() { ::close(fd_); }

}  // namespace weft::fuzz
