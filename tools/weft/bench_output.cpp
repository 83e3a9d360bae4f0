// The bench commands' shared output helpers (bench_output.h).
#include "bench_output.h"

#include <fstream>
#include <sstream>
#include <thread>

#include "weft/backend/cpu.h"
#include "weft/core/build_info.h"
#include "weft/core/error.h"

namespace weft::tool {

void write_text(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("bench", "cannot write the ", what, " file '", path, "'");
  out << text;
  if (!out.flush()) fail("bench", "writing the ", what, " file '", path, "' failed");
}

void check_writable(const std::string& path, const char* what) {
  if (path.empty()) return;
  std::ofstream probe(path, std::ios::app);
  if (!probe) fail("bench", "cannot write the ", what, " file '", path, "'");
}

std::array<double, 3> load_average() {
  std::array<double, 3> load{};
  std::ifstream in("/proc/loadavg");
  in >> load[0] >> load[1] >> load[2];
  if (!in) load = {};
  return load;
}

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
  }
  return "unknown";
}

}  // namespace

MachineInfo machine_info(int threads) {
  MachineInfo m;
  m.cpu = cpu_model();
  m.logical_cpus = std::thread::hardware_concurrency();
  m.threads = threads;
  m.backend = std::string(cpu_backend_summary());
  m.commit = weft::build_commit();
  m.load_before = load_average();
  return m;
}

nlohmann::json to_json(const MachineInfo& m) {
  return {{"cpu", m.cpu},
          {"logical_cpus", m.logical_cpus},
          {"threads", m.threads},
          {"backend", m.backend},
          {"commit", m.commit},
          {"load_average_before", m.load_before},
          {"load_average_after", m.load_after}};
}

}  // namespace weft::tool
