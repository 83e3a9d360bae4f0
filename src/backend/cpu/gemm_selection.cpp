// The GEMM provider for each product (weft/backend/gemm_selection.h): shape classes, the
// interleaved timing that calibrates a class, and the cache file keyed by the CPU's identity.
#include "weft/backend/gemm_selection.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>

#include "calibration_checks.h"
#include "calibration_clock.h"
#include "sgemm.h"
#include "weft/core/error.h"
#ifdef WEFT_HAVE_ONEDNN
#include <dnnl.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace weft {
namespace {

// Extent buckets: 1, 2, 3-4, 5-8, ..., 2049-4096, over 4096; bucket b stands for 2^b.
constexpr int kBuckets = 14;
constexpr int kClassCount = 8 * kBuckets * kBuckets * kBuckets;
constexpr double kMaxCalibrationFlops = double(1ll << 31);
// How much faster the untransposed product must have measured for a transposed copy to be
// worth its pass and memory (gemm_prefers_untransposed_copy).
constexpr double kUntransposedMargin = 1.05;
// Version 3: rates measured with calibration_clock.h (version 2's wall-clock rates could be
// skewed by another process on the core, so those files are measured again).
constexpr const char* kCacheHeader = "weft gemm calibration 3";
constexpr std::uintmax_t kMaxCacheBytes = 1 << 20;
// A noisy class is measured again after 1, 2 and 4 seconds, then kept in memory as it is.
constexpr int kMaxRemeasures = 3;
// Classes whose representative product is cheaper than this are not checked in use: their
// products are too short to time against the record.
constexpr double kMinCheckedFlops = double(1 << 20);
// With an OpenBLAS that runs fallback kernels (openblas_core()), OpenBLAS must measure this much
// faster than oneDNN to be chosen: its rates are the likelier to be noise.
constexpr double kFallbackMargin = 1.25;

int bucket_of(std::int64_t extent) {
  int b = 0;
  while (b + 1 < kBuckets && (std::int64_t(1) << b) < extent) ++b;
  return b;
}

std::string bucket_label(int b) {
  if (b == 0) return "1";
  if (b == 1) return "2";
  const std::string upper = std::to_string(std::int64_t(1) << b);
  if (b + 1 == kBuckets) return ">" + std::to_string(std::int64_t(1) << (b - 1));
  return std::to_string((std::int64_t(1) << (b - 1)) + 1) + "-" + upper;
}

int class_index(const GemmShapeClass& c) {
  const int kind = int(c.transpose_a) * 4 + int(c.transpose_b) * 2 + int(c.accumulate);
  return ((kind * kBuckets + c.m_bucket) * kBuckets + c.n_bucket) * kBuckets + c.k_bucket;
}

std::string kind_label(const GemmShapeClass& c) {
  return std::string(c.transpose_a ? "T" : "N") + (c.transpose_b ? "T" : "N") +
         (c.accumulate ? "+" : "");
}

// ---- the identity a cache file belongs to -------------------------------------------------

std::string cpu_description() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  char vendor[13] = {};
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
  }
  unsigned family = 0, model = 0, stepping = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    stepping = a & 0xf;
    family = (a >> 8) & 0xf;
    model = (a >> 4) & 0xf;
    if (family == 0xf) family += (a >> 20) & 0xff;
    if (family >= 6) model += ((a >> 16) & 0xf) << 4;
  }
  std::string brand;
  unsigned max_extended = __get_cpuid_max(0x80000000u, nullptr);
  if (max_extended >= 0x80000004u) {
    char text[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      __get_cpuid(0x80000002u + leaf, &a, &b, &c, &d);
      std::memcpy(text + leaf * 16, &a, 4);
      std::memcpy(text + leaf * 16 + 4, &b, 4);
      std::memcpy(text + leaf * 16 + 8, &c, 4);
      std::memcpy(text + leaf * 16 + 12, &d, 4);
    }
    brand = text;
  }
  std::string features;
  if (__builtin_cpu_supports("avx2")) features += " avx2";
  if (__builtin_cpu_supports("fma")) features += " fma";
  if (__builtin_cpu_supports("avx512f")) features += " avx512f";
  return std::string(vendor) + " family " + std::to_string(family) + " model " +
         std::to_string(model) + " stepping " + std::to_string(stepping) + " '" + brand + "'" +
         features;
#else
  return "non-x86 cpu";
#endif
}

// The providers' versions and the kernels they run (OpenBLAS's configuration names its core
// type, which OPENBLAS_CORETYPE can force), so a cache measured with either held to an older
// instruction set is never read by a run that is not.
std::string library_versions() {
  std::string versions;
#ifdef WEFT_HAVE_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  versions += "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
              std::to_string(v->patch) + " isa " + backend::cpu::onednn_isa() + "; ";
#endif
  versions += "openblas ";
  versions += openblas_get_config();
  return versions;
}

std::string one_line(std::string text) {
  for (char& ch : text)
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string identity() {
  static const std::string id = one_line(cpu_description() + "; " + library_versions());
  return id;
}

std::string hex_hash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::string default_cache_path() {
  if (const char* path = std::getenv("WEFT_GEMM_CACHE")) {
    const std::string value = path;
    return value == "off" ? "" : value;
  }
  std::filesystem::path dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    dir = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home)
    dir = std::filesystem::path(home) / ".cache";
  else
    return "";
  return (dir / "weft" / ("gemm-" + hex_hash(identity()) + ".txt")).string();
}

// ---- measuring one class ------------------------------------------------------------------

struct Measurement {
  std::vector<double> gflops;  // per provider
  std::string noise;           // calibration_noise's verdict: "" when it may be cached
};

// GFLOP/s of each built-in provider at the class's representative shape (beta 1 when the
// class accumulates): two warm-up calls each, then four rounds that time every provider in
// turn, each a run of calls lasting about 2 ms (one call when a call is longer); the best run
// of each provider counts. Timed by calibration_seconds: at one thread the thread's CPU time,
// which time spent descheduled does not inflate. The rounds' spread and the thread's share of
// the wall time decide whether the rates are clean enough to cache (calibration_checks.h).
Measurement measure_class(const GemmShapeClass& shape_class) {
  const GemmShape shape = gemm_class_representative(shape_class);
  std::vector<float> a(std::size_t(shape.m * shape.k)), b(std::size_t(shape.k * shape.n)),
      c(std::size_t(shape.m * shape.n));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(int(i * 7 % 17) - 8) * 0.01f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(int(i * 5 % 13) - 6) * 0.01f;
  const std::int64_t lda = shape.transpose_a ? shape.m : shape.k;
  const std::int64_t ldb = shape.transpose_b ? shape.k : shape.n;
  const auto providers = available_gemm_providers();
  auto call = [&](GemmProvider provider) {
    backend::cpu::sgemm_with(provider, shape.transpose_a, shape.transpose_b, shape.m, shape.n,
                             shape.k, 1.0f, a.data(), lda, b.data(), ldb,
                             shape.accumulate ? 1.0f : 0.0f, c.data(), shape.n);
  };
  const int threads = num_threads();
  auto seconds_per_call = [&](GemmProvider provider, std::int64_t calls) {
    const double start = backend::cpu::calibration_seconds(threads);
    for (std::int64_t i = 0; i < calls; ++i) call(provider);
    return (backend::cpu::calibration_seconds(threads) - start) / double(calls);
  };
  std::vector<std::int64_t> calls(providers.size());
  std::vector<std::vector<double>> rounds(providers.size());
  for (std::size_t p = 0; p < providers.size(); ++p) {
    call(providers[p]);
    const double estimate = seconds_per_call(providers[p], 1);
    calls[p] = std::max<std::int64_t>(1, std::llround(0.002 / std::max(estimate, 1e-9)));
  }
  backend::cpu::CalibrationTimes times;
  times.threads = threads;
  const double thread_start = backend::cpu::thread_cpu_seconds();
  const double wall_start = backend::cpu::wall_seconds();
  for (int round = 0; round < 4; ++round)
    for (std::size_t p = 0; p < providers.size(); ++p)
      rounds[p].push_back(seconds_per_call(providers[p], calls[p]));
  times.thread_seconds = backend::cpu::thread_cpu_seconds() - thread_start;
  times.wall_seconds = backend::cpu::wall_seconds() - wall_start;
  Measurement measured;
  for (const std::vector<double>& runs : rounds)
    measured.gflops.push_back(gemm_flops(shape) /
                              std::max(*std::min_element(runs.begin(), runs.end()), 1e-12) / 1e9);
  measured.noise = backend::cpu::calibration_noise(times, rounds);
  return measured;
}

// ---- the cache file -----------------------------------------------------------------------

// One class line: "class <threads> <kind> <m> <n> <k> <provider> <name>=<gflops>...", kind
// being NN, NT, TN or TT, with "+" when the product accumulates, m n k the buckets.
struct CacheLine {
  int threads = 0;
  GemmClassChoice choice;
};

std::string format_line(int threads, const GemmClassChoice& choice) {
  std::ostringstream out;
  const GemmShapeClass& c = choice.shape_class;
  out << "class " << threads << ' ' << kind_label(c) << ' ' << c.m_bucket << ' ' << c.n_bucket
      << ' ' << c.k_bucket << ' ' << gemm_provider_name(choice.provider);
  const auto providers = available_gemm_providers();
  char rate[32];
  for (std::size_t p = 0; p < providers.size(); ++p) {
    std::snprintf(rate, sizeof rate, "%.2f", choice.gflops[p]);
    out << ' ' << gemm_provider_name(providers[p]) << '=' << rate;
  }
  return out.str();
}

// Parses a class line; returns "" or what is wrong with it.
std::string parse_line(const std::string& line, CacheLine& parsed) {
  std::istringstream in(line);
  std::string word, kind, provider;
  int m = -1, n = -1, k = -1;
  if (!(in >> word >> parsed.threads >> kind >> m >> n >> k >> provider) || word != "class")
    return "expected 'class <threads> <kind> <m> <n> <k> <provider> <rates>'";
  if (parsed.threads < 1) return "thread count below 1";
  const bool accumulate = kind.size() == 3 && kind[2] == '+';
  if (kind.size() != 2 + std::size_t(accumulate) || (kind[0] != 'N' && kind[0] != 'T') ||
      (kind[1] != 'N' && kind[1] != 'T'))
    return "kind '" + kind + "' is not NN, NT, TN or TT, with or without '+'";
  for (int bucket : {m, n, k})
    if (bucket < 0 || bucket >= kBuckets)
      return "a size bucket outside 0.." + std::to_string(kBuckets - 1);
  parsed.choice.shape_class = {kind[0] == 'T', kind[1] == 'T', accumulate, m, n, k};
  parsed.choice.from_cache = true;
  const auto providers = available_gemm_providers();
  bool known = false;
  for (GemmProvider p : providers)
    if (gemm_provider_name(p) == provider) {
      parsed.choice.provider = p;
      known = true;
    }
  if (!known) return "provider '" + provider + "' is not built in";
  parsed.choice.gflops.assign(providers.size(), 0.0);
  for (std::size_t p = 0; p < providers.size(); ++p) {
    std::string rate;
    const std::string prefix = std::string(gemm_provider_name(providers[p])) + "=";
    if (!(in >> rate) || rate.compare(0, prefix.size(), prefix) != 0)
      return "expected " + prefix + "<GFLOP/s>";
    char* end = nullptr;
    const double value = std::strtod(rate.c_str() + prefix.size(), &end);
    if (*end != '\0' || !std::isfinite(value) || value <= 0)
      return "rate '" + rate + "' is not a positive number";
    parsed.choice.gflops[p] = value;
  }
  if (in >> word) return "unexpected '" + word + "' after the rates";
  return "";
}

// Reads the cache's class lines (every thread count). Returns "" or why the file is ignored;
// a missing file is not an error.
std::string read_cache(const std::string& path, std::vector<CacheLine>& lines, bool& exists) {
  lines.clear();
  std::error_code error;
  exists = std::filesystem::exists(path, error);
  if (!exists) return "";
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return "cannot read its size: " + error.message();
  if (size > kMaxCacheBytes) return "larger than " + std::to_string(kMaxCacheBytes) + " bytes";
  std::ifstream in(path);
  if (!in) return "cannot open it";
  std::string line;
  if (!std::getline(in, line) || line != kCacheHeader)
    return "line 1 is not '" + std::string(kCacheHeader) + "'";
  if (!std::getline(in, line) || line != "cpu " + identity())
    return "line 2: written for another CPU or library versions";
  for (int number = 3; std::getline(in, line); ++number) {
    CacheLine parsed;
    if (const std::string why = parse_line(line, parsed); !why.empty())
      return "line " + std::to_string(number) + ": " + why;
    lines.push_back(std::move(parsed));
  }
  return "";
}

// Writes the lines through a temporary file and a rename, so a reader never sees half a file.
// Returns "" or why it could not.
std::string write_cache(const std::string& path, const std::vector<CacheLine>& lines) {
  std::error_code error;
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), error);
  if (error) return "cannot create " + target.parent_path().string() + ": " + error.message();
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << kCacheHeader << '\n' << "cpu " << identity() << '\n';
    for (const CacheLine& line : lines) out << format_line(line.threads, line.choice) << '\n';
    out.flush();
    if (!out) {
      std::filesystem::remove(temporary, error);
      return "cannot write " + temporary;
    }
  }
  std::filesystem::rename(temporary, target, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    return "cannot rename into place: " + error.message();
  }
  return "";
}

// ---- the process's choices ----------------------------------------------------------------

constexpr std::int64_t kSettled = 0;
constexpr std::int64_t kCheckInUse = -1;
constexpr std::int64_t kWarmUpInUse = -2;

std::int64_t steady_milliseconds() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Selection {
  std::mutex mutex;
  std::string cache_path;
  std::string cache_status = "none yet";
  // The thread count the table holds choices for; -1 until loaded (again).
  std::atomic<int> threads{-1};
  // Index into available_gemm_providers(), or -1 while the class is not calibrated.
  std::array<std::atomic<int>, kClassCount> choice;
  // For transposed-b classes: gemm_prefers_untransposed_copy's last answer at this thread
  // count, coded with the provider it was for, or -1.
  std::array<std::atomic<int>, kClassCount> untransposed;
  // What is still to check about a class's choice: kSettled, kWarmUpInUse (read from the cache:
  // its first product in this process runs untimed), kCheckInUse (time the next one against the
  // record), or the steady-clock millisecond after which a noisy measurement is measured again.
  std::array<std::atomic<std::int64_t>, kClassCount> recheck;
  std::map<int, GemmClassChoice> details;  // by class index
  std::map<int, int> remeasures;           // by class index: noisy measurements so far

  Selection() {
    for (auto& c : choice) c.store(-1);
    for (auto& u : untransposed) u.store(-1);
    for (auto& r : recheck) r.store(kSettled);
    cache_path = default_cache_path();
  }
};

Selection& selection() {
  static Selection* s = new Selection;  // never destroyed: products may run during exit
  return *s;
}

int provider_position(GemmProvider provider) {
  const auto providers = available_gemm_providers();
  return int(std::find(providers.begin(), providers.end(), provider) - providers.begin());
}

// With the mutex held: the table for the current thread count, from the cache file.
void load(Selection& s) {
  const int threads = num_threads();
  if (s.threads.load() == threads) return;
  for (auto& c : s.choice) c.store(-1);
  for (auto& u : s.untransposed) u.store(-1);
  for (auto& r : s.recheck) r.store(kSettled);
  s.details.clear();
  s.remeasures.clear();
  if (!s.cache_path.empty()) {
    std::vector<CacheLine> lines;
    bool exists = false;
    const std::string why = read_cache(s.cache_path, lines, exists);
    if (!why.empty()) {
      s.cache_status = "ignored (will be replaced): " + why;
    } else {
      int count = 0;
      for (const CacheLine& line : lines)
        if (line.threads == threads) {
          const int index = class_index(line.choice.shape_class);
          s.details[index] = line.choice;
          s.choice[std::size_t(index)].store(provider_position(line.choice.provider));
          if (gemm_flops(gemm_class_representative(line.choice.shape_class)) >= kMinCheckedFlops)
            s.recheck[std::size_t(index)].store(kWarmUpInUse);
          ++count;
        }
      s.cache_status = exists ? "read " + std::to_string(count) + " classes for " +
                                    std::to_string(threads) + " thread(s)"
                              : "none yet";
    }
  }
  s.threads.store(threads);
}

// With the mutex held: merges this process's choices into the file's (other thread counts
// and classes another process added meanwhile are kept).
void save(Selection& s) {
  if (s.cache_path.empty()) return;
  std::vector<CacheLine> lines;
  bool exists = false;
  if (!read_cache(s.cache_path, lines, exists).empty()) lines.clear();
  const int threads = s.threads.load();
  std::map<std::pair<int, int>, CacheLine> merged;
  for (CacheLine& line : lines)
    merged[{line.threads, class_index(line.choice.shape_class)}] = std::move(line);
  for (const auto& [index, choice] : s.details)
    if (choice.noise.empty()) merged[{threads, index}] = {threads, choice};
  lines.clear();
  for (auto& [key, line] : merged) lines.push_back(std::move(line));
  if (const std::string why = write_cache(s.cache_path, lines); !why.empty())
    s.cache_status = "not written: " + why;
}

}  // namespace

GemmShapeClass gemm_shape_class(const GemmShape& shape) {
  return {shape.transpose_a,  shape.transpose_b,  shape.accumulate,
          bucket_of(shape.m), bucket_of(shape.n), bucket_of(shape.k)};
}

GemmShape gemm_class_representative(const GemmShapeClass& c) {
  GemmShape shape{std::int64_t(1) << c.m_bucket,
                  std::int64_t(1) << c.n_bucket,
                  std::int64_t(1) << c.k_bucket,
                  c.transpose_a,
                  c.transpose_b,
                  c.accumulate};
  while (gemm_flops(shape) > kMaxCalibrationFlops) {
    std::int64_t* largest = &shape.m;
    if (shape.n > *largest) largest = &shape.n;
    if (shape.k > *largest) largest = &shape.k;
    *largest /= 2;
  }
  return shape;
}

std::string gemm_class_label(const GemmShapeClass& c) {
  return kind_label(c) + " m " + bucket_label(c.m_bucket) + " n " + bucket_label(c.n_bucket) +
         " k " + bucket_label(c.k_bucket);
}

namespace {

// The provider to choose from measured rates: the fastest, except that an OpenBLAS running
// fallback kernels must beat the others by kFallbackMargin.
int fastest_provider(const std::vector<double>& gflops) {
  const auto providers = available_gemm_providers();
  int best = int(std::max_element(gflops.begin(), gflops.end()) - gflops.begin());
  if (providers[std::size_t(best)] == GemmProvider::kOpenBlas && openblas_core().fallback)
    for (std::size_t p = 0; p < providers.size(); ++p)
      if (int(p) != best && kFallbackMargin * gflops[p] >= gflops[std::size_t(best)]) best = int(p);
  return best;
}

// With the mutex held: measures the class and records the choice; a clean measurement is
// cached, a noisy one is used until it is measured again (kMaxRemeasures times at most).
void measure_and_record(Selection& s, const GemmShapeClass& shape_class) {
  const int index = class_index(shape_class);
  Measurement measured = measure_class(shape_class);
  GemmClassChoice choice;
  choice.shape_class = shape_class;
  choice.gflops = std::move(measured.gflops);
  choice.noise = std::move(measured.noise);
  const int best = fastest_provider(choice.gflops);
  choice.provider = available_gemm_providers()[std::size_t(best)];
  s.details[index] = choice;
  s.choice[std::size_t(index)].store(best, std::memory_order_release);
  std::int64_t recheck = kSettled;
  if (!choice.noise.empty()) {
    const int attempt = s.remeasures[index]++;
    if (attempt < kMaxRemeasures) recheck = steady_milliseconds() + (std::int64_t(1000) << attempt);
  }
  s.recheck[std::size_t(index)].store(recheck, std::memory_order_release);
  save(s);
}

// With the mutex held: the class's calibration, measured now when neither this process nor the
// cache has it, or when a noisy measurement is due to be measured again.
const GemmClassChoice& calibrated(Selection& s, const GemmShapeClass& shape_class) {
  const std::size_t index = std::size_t(class_index(shape_class));
  load(s);
  const std::int64_t recheck = s.recheck[index].load();
  if (s.choice[index].load() < 0 || (recheck > 0 && steady_milliseconds() >= recheck))
    measure_and_record(s, shape_class);
  return s.details.at(int(index));
}

// The class of the same product with b not transposed.
GemmShapeClass untransposed_twin(GemmShapeClass shape_class) {
  shape_class.transpose_b = false;
  return shape_class;
}

// gemm_prefers_untransposed_copy's rule on a transposed-b class and its untransposed twin, each
// at the provider its products use.
bool untransposed_faster(const GemmClassChoice& nt, const GemmClassChoice& nn) {
  const auto forced = forced_gemm_provider();
  const double nt_rate = nt.gflops[std::size_t(provider_position(forced.value_or(nt.provider)))];
  const double nn_rate = nn.gflops[std::size_t(provider_position(forced.value_or(nn.provider)))];
  return nn_rate > kUntransposedMargin * nt_rate;
}

}  // namespace

GemmProvider gemm_provider_for(const GemmShape& shape) {
  return backend::cpu::gemm_route_for(shape).provider;
}

namespace backend::cpu {

namespace {

// Whether a product of `shape` is to be timed for its class's in-use check (`recheck` being the
// class's state): a product much smaller than the class's representative runs below its rate
// for its size, so only one within 8x of its flops counts, and the first such product in the
// process only moves the class on to kCheckInUse, untimed: it pays for first touches (fresh
// output pages, oneDNN's set-up, cold operands) and ran up to 100x below the record (SST: 0.7
// GFLOP/s in a class recorded at 90), so the class was measured again in every process.
bool times_in_use(const GemmShape& shape, const GemmShapeClass& shape_class,
                  std::atomic<std::int64_t>& recheck) {
  std::int64_t state = recheck.load(std::memory_order_relaxed);
  if ((state != kCheckInUse && state != kWarmUpInUse) ||
      8 * gemm_flops(shape) < gemm_flops(gemm_class_representative(shape_class)))
    return false;
  if (state == kCheckInUse) return true;
  recheck.compare_exchange_strong(state, kCheckInUse, std::memory_order_relaxed);
  return false;
}

}  // namespace

GemmRoute gemm_route_for(const GemmShape& shape) {
  if (const auto forced = forced_gemm_provider()) return {*forced, false};
  const auto providers = available_gemm_providers();
  if (providers.size() == 1) return {providers[0], false};
  if (!openblas_workers_flush_denormals()) return {providers[0], false};  // oneDNN: see cpu.h
  Selection& s = selection();
  const GemmShapeClass shape_class = gemm_shape_class(shape);
  const std::size_t index = std::size_t(class_index(shape_class));
  if (s.threads.load(std::memory_order_acquire) == num_threads()) {
    const int known = s.choice[index].load(std::memory_order_acquire);
    const std::int64_t recheck = s.recheck[index].load(std::memory_order_relaxed);
    const bool due = recheck > 0 && steady_milliseconds() >= recheck;
    if (known >= 0 && !due)
      return {providers[std::size_t(known)], times_in_use(shape, shape_class, s.recheck[index])};
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  const GemmProvider provider = calibrated(s, shape_class).provider;
  return {provider, times_in_use(shape, shape_class, s.recheck[index])};
}

void gemm_check_in_use(const GemmShape& shape, GemmProvider provider, double seconds) {
  Selection& s = selection();
  std::lock_guard<std::mutex> lock(s.mutex);
  const GemmShapeClass shape_class = gemm_shape_class(shape);
  const int index = class_index(shape_class);
  if (s.recheck[std::size_t(index)].load() != kCheckInUse || forced_gemm_provider()) return;
  s.recheck[std::size_t(index)].store(kSettled);
  const auto found = s.details.find(index);
  if (found == s.details.end() || found->second.provider != provider) return;
  const double recorded = found->second.gflops[std::size_t(provider_position(provider))];
  const double in_use = gemm_flops(shape) / std::max(seconds, 1e-12) / 1e9;
  const double share =
      std::min(1.0, gemm_flops(shape) / gemm_flops(gemm_class_representative(shape_class)));
  if (in_use_rate_contradicts(in_use, recorded, share)) measure_and_record(s, shape_class);
}

}  // namespace backend::cpu

bool gemm_prefers_untransposed_copy(const GemmShape& shape) {
  if (!shape.transpose_b) return false;
  Selection& s = selection();
  const int index = class_index(gemm_shape_class(shape));
  // An answer is for the calibrated choices (code 0, 1) or for one forced provider (2 + 2p,
  // 3 + 2p), since a forced provider is judged by its own rates.
  const auto forced = forced_gemm_provider();
  const int base = forced ? 2 + 2 * provider_position(*forced) : 0;
  if (s.threads.load(std::memory_order_acquire) == num_threads()) {
    const int known = s.untransposed[std::size_t(index)].load(std::memory_order_acquire);
    if (known == base || known == base + 1) return known == base + 1;
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  const GemmClassChoice& nt = calibrated(s, gemm_shape_class(shape));
  const bool preferred = untransposed_faster(nt, calibrated(s, untransposed_twin(nt.shape_class)));
  s.untransposed[std::size_t(index)].store(base + (preferred ? 1 : 0), std::memory_order_release);
  return preferred;
}

void remeasure_gemm_classes() {
  Selection& s = selection();
  std::lock_guard<std::mutex> lock(s.mutex);
  load(s);
  for (auto& c : s.choice) c.store(-1);
  for (auto& u : s.untransposed) u.store(-1);
  for (auto& r : s.recheck) r.store(kSettled);
  s.details.clear();
  s.remeasures.clear();
}

void set_gemm_cache_path(const std::string& path) {
  Selection& s = selection();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.cache_path = path;
  s.cache_status = "none yet";
  s.threads.store(-1);
  load(s);
}

GemmSelectionReport gemm_selection_report() {
  GemmSelectionReport report;
  report.cpu_identity = identity();
  if (batch_invariant()) {
    const GemmProvider provider = batch_invariant_gemm_provider();
    report.mode = std::string("batch-invariant: ") +
                  (backend::cpu::fixed_order_sgemm_built()
                       ? "x · W through Weft's fixed-order kernel, x · Wᵀ through "
                       : "") +
                  std::string(gemm_provider_name(provider)) + " in blocks of " +
                  std::to_string(backend::cpu::invariant_row_block(provider)) +
                  " row(s), one thread per call";
  } else if (const auto forced = forced_gemm_provider()) {
    report.mode = "forced by " + forced_gemm_provider_source();
  } else if (available_gemm_providers().size() == 1) {
    report.mode = "the only provider built in";
  } else {
    report.mode = "calibrated per shape class";
  }
  Selection& s = selection();
  std::lock_guard<std::mutex> lock(s.mutex);
  load(s);
  report.cache_path = s.cache_path;
  report.cache_status = s.cache_path.empty() ? "memory only" : s.cache_status;
  report.clock = backend::cpu::calibration_clock_name(num_threads());
  for (const auto& [index, choice] : s.details) {
    report.classes.push_back(choice);
    if (!choice.shape_class.transpose_b) continue;
    const auto twin = s.details.find(class_index(untransposed_twin(choice.shape_class)));
    if (twin != s.details.end())
      report.classes.back().untransposed_copy = untransposed_faster(choice, twin->second);
  }
  return report;
}

}  // namespace weft
