// weft_fuzz_replay TARGET PATH...: runs one fuzz target over files (and the files in folders,
// recursively), as libFuzzer would, without libFuzzer: the regression test of every input in
// fuzz/corpus/TARGET/. Exits 0 when all ran, 2 on bad usage; a bug aborts in the target.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "replay_registry.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const auto& targets = weft::fuzz::registered_targets();
  if (argc < 3 || targets.find(argv[1]) == targets.end()) {
    std::fprintf(stderr, "usage: weft_fuzz_replay TARGET PATH...\ntargets:");
    for (const auto& [name, body] : targets) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& entry : fs::recursive_directory_iterator(argv[i]))
        if (entry.is_regular_file()) files.push_back(entry.path());
    } else if (fs::is_regular_file(argv[i])) {
      files.emplace_back(argv[i]);
    } else {
      std::fprintf(stderr, "weft_fuzz_replay: no such file or folder: %s\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  const weft::fuzz::TargetBody body = targets.at(argv[1]);
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "%s: %s (%zu bytes)\n", argv[1], file.c_str(), bytes.size());
    weft::fuzz::run_guarded(argv[1], body, reinterpret_cast<const std::uint8_t*>(bytes.data()),
                            bytes.size());
  }
  std::printf("%s: %zu inputs ran without a crash\n", argv[1], files.size());
  return files.empty() ? 2 : 0;
}
