// What the bench commands share for their output: writing a result file (and finding out
// before a long run that it cannot be written), and the machine a run was measured on (CPU
// model, threads, commit, load average), which every benchmark log records beside its figures.
#pragma once

#include <array>
#include <string>

#include <nlohmann/json.hpp>

namespace weft::tool {

// Writes `text` to `path`, failing with one line that names the `what` file ("output", "plot").
void write_text(const std::string& path, const std::string& text, const char* what);
// Fails before a long run, not after it, when an output file cannot be written ("": nothing).
void check_writable(const std::string& path, const char* what);

// The 1-, 5- and 15-minute load averages of /proc/loadavg (zeros where it cannot be read).
std::array<double, 3> load_average();

struct MachineInfo {
  std::string cpu;            // /proc/cpuinfo's first "model name" ("unknown" without one)
  unsigned logical_cpus = 0;  // std::thread::hardware_concurrency()
  int threads = 0;            // the GEMM threads the run used
  std::string backend;        // cpu_backend_summary(): the GEMM provider and its settings
  std::string commit;         // the commit the binary was built from (weft::build_commit())
  std::array<double, 3> load_before{}, load_after{};
};

// The machine now; load_after is left for the caller to fill in once the run has ended.
MachineInfo machine_info(int threads);
nlohmann::json to_json(const MachineInfo& machine);

}  // namespace weft::tool
