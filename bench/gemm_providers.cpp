// weft_bench_gemm: sgemm GFLOP/s of every provider at the Tree-LSTM products, in one process:
// oneDNN and OpenBLAS through Weft's backend gemm, BLIS loaded with dlopen (RTLD_DEEPBIND, so
// its CBLAS does not resolve into OpenBLAS), and OpenBLAS with OPENBLAS_CORETYPE forced, in
// child processes of this program (the variable is read only when libopenblas loads). Prints
// CSV or JSON on stdout and a summary (winners, Weft's default, ceilings) on stderr.
#include <cblas.h>
#include <dlfcn.h>
#include <immintrin.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "treelstm/iclr_benchmark.h"
#include "weft/backend/cpu.h"
#include "weft/backend/gemm_ceiling.h"
#include "weft/backend/gemm_selection.h"
#include "weft/tensor/tensor.h"
#ifdef WEFT_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#endif

namespace {

using weft::GemmShape;

constexpr std::int64_t kVectorSizes[] = {128, 256, 512, 1024};
constexpr std::int64_t kRows[] = {1, 64, 256, 1024};
// Names of tree_lstm_gemm_shapes' products, in its order.
constexpr const char* kProductNames[] = {"hidden", "gates", "d_hidden", "dW1", "d_in", "dW0"};
constexpr const char* kForcedCoretypes[] = {"SkylakeX", "Haswell", "Zen"};
constexpr const char* kForcedProvider = "openblas_forced";
constexpr const char* kWeftChoice = "weft";

struct Options {
  int threads = 1;
  double min_seconds = 0.05;  // keeps the full run under a minute on one core
  std::string format = "csv";
  bool child = false;  // hidden: measure OpenBLAS only and print CSV rows (no header)
  bool machine_only = false;
};

struct Result {
  std::string provider, coretype;
  GemmShape shape;
  double gflops = 0;
};

// One product of the Tree-LSTM model at (N, rows).
struct Product {
  std::int64_t vector_size, rows;
  const char* name;
  GemmShape shape;
};

std::vector<Product> all_products() {
  std::vector<Product> products;
  for (std::int64_t n : kVectorSizes)
    for (std::int64_t rows : kRows) {
      auto shapes = weft::treelstm::tree_lstm_gemm_shapes(rows, n, true);
      for (std::size_t i = 0; i < shapes.size(); ++i)
        products.push_back({n, rows, kProductNames[i], shapes[i]});
    }
  return products;
}

// Distinct shapes, in first-use order.
std::vector<GemmShape> distinct_shapes(const std::vector<Product>& products) {
  std::vector<GemmShape> shapes;
  for (const Product& p : products)
    if (std::find(shapes.begin(), shapes.end(), p.shape) == shapes.end()) shapes.push_back(p.shape);
  return shapes;
}

std::string csv_row(const Result& r) {
  char line[256];
  std::snprintf(line, sizeof line, "%s,%s,%lld,%lld,%lld,%d,%d,%.2f", r.provider.c_str(),
                r.coretype.c_str(), (long long)r.shape.m, (long long)r.shape.n,
                (long long)r.shape.k, int(r.shape.transpose_a), int(r.shape.transpose_b), r.gflops);
  return line;
}

// The shape of a CSV row: the product of `shapes` with its extents and transposes (the CSV has
// no accumulate column; no two Tree-LSTM products differ only in it).
GemmShape shape_from_row(long long m, long long n, long long k, int ta, int tb,
                         const std::vector<GemmShape>& shapes) {
  for (const GemmShape& s : shapes)
    if (s.m == m && s.n == n && s.k == k && s.transpose_a == (ta != 0) &&
        s.transpose_b == (tb != 0))
      return s;
  return {m, n, k, ta != 0, tb != 0, true};
}

// Measures Weft's backend gemm with `provider` at every shape.
std::vector<Result> measure_weft_provider(weft::GemmProvider provider, const std::string& coretype,
                                          const std::vector<GemmShape>& shapes, double min_s,
                                          const std::string& label) {
  std::vector<Result> results;
  for (const GemmShape& s : shapes)
    results.push_back({label, coretype, s, weft::measure_sgemm_gflops(s, provider, min_s)});
  return results;
}

std::string onednn_isa() {
#ifdef WEFT_HAVE_ONEDNN
  std::string isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());  // "cpu_isa_avx2"
  return isa.rfind("cpu_isa_", 0) == 0 ? isa.substr(8) : isa;
#else
  return "";
#endif
}

// ---- BLIS through dlopen ------------------------------------------------------------------

using SgemmFn = decltype(&cblas_sgemm);

struct Blis {
  void* handle = nullptr;
  SgemmFn sgemm = nullptr;
  std::string version, arch, path;
};

// Loads BLIS privately and checks that cblas_sgemm really is BLIS's (dladdr names the file).
bool load_blis(Blis& blis, int threads, std::string& note) {
  blis.handle = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!blis.handle) {
    note = std::string("BLIS skipped: ") + dlerror() + " (apt-get install libblis4)";
    return false;
  }
  blis.sgemm = reinterpret_cast<SgemmFn>(dlsym(blis.handle, "cblas_sgemm"));
  auto version = reinterpret_cast<char* (*)()>(dlsym(blis.handle, "bli_info_get_version_str"));
  auto arch_id = reinterpret_cast<int (*)()>(dlsym(blis.handle, "bli_arch_query_id"));
  auto arch_name = reinterpret_cast<char* (*)(int)>(dlsym(blis.handle, "bli_arch_string"));
  auto set_threads =
      reinterpret_cast<void (*)(std::int64_t)>(dlsym(blis.handle, "bli_thread_set_num_threads"));
  Dl_info info{};
  if (!blis.sgemm || blis.sgemm == &cblas_sgemm || !version || !arch_id || !arch_name ||
      !set_threads || !dladdr(reinterpret_cast<void*>(blis.sgemm), &info) || !info.dli_fname ||
      std::string(info.dli_fname).find("blis") == std::string::npos) {
    note = "BLIS skipped: libblis.so.4 lacks the expected symbols or cblas_sgemm is not BLIS's";
    return false;
  }
  blis.version = version();
  blis.arch = arch_name(arch_id());
  blis.path = info.dli_fname;
  set_threads(threads);
  return true;
}

std::vector<Result> measure_blis(const Blis& blis, const std::vector<GemmShape>& shapes,
                                 double min_s) {
  std::vector<Result> results;
  for (const GemmShape& s : shapes) {
    weft::Tensor a = weft::Tensor::full(weft::Shape{s.m, s.k}, 0.01f);
    weft::Tensor b = weft::Tensor::full(weft::Shape{s.k, s.n}, 0.02f);
    weft::Tensor c = weft::Tensor::zeros(weft::Shape{s.m, s.n});
    const int lda = int(s.transpose_a ? s.m : s.k), ldb = int(s.transpose_b ? s.k : s.n);
    const float beta = s.accumulate ? 1.0f : 0.0f;
    auto run = [&] {
      blis.sgemm(CblasRowMajor, s.transpose_a ? CblasTrans : CblasNoTrans,
                 s.transpose_b ? CblasTrans : CblasNoTrans, int(s.m), int(s.n), int(s.k), 1.0f,
                 a.data<float>(), lda, b.data<float>(), ldb, beta, c.data<float>(), int(s.n));
    };
    results.push_back({"blis", blis.arch, s, weft::measure_gflops(s, run, min_s)});
  }
  return results;
}

// ---- OpenBLAS core types in child processes -----------------------------------------------

// Runs this program again with OPENBLAS_CORETYPE=coretype and --child, returns its stdout.
std::string run_child(const char* coretype, const Options& options) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    setenv("OPENBLAS_CORETYPE", coretype, 1);
    const std::string threads = std::to_string(options.threads);
    const std::string min_s = std::to_string(options.min_seconds);
    execl("/proc/self/exe", "weft_bench_gemm", "--child", "--threads", threads.c_str(),
          "--min-seconds", min_s.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t got; (got = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, got);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    std::fprintf(stderr, "note: child with OPENBLAS_CORETYPE=%s failed (status %d)\n", coretype,
                 status);
  return out;
}

std::vector<Result> parse_child_csv(const std::string& text, const std::vector<GemmShape>& shapes) {
  std::vector<Result> results;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    char provider[64], coretype[64];
    long long m, n, k;
    int ta, tb;
    double gflops;
    if (std::sscanf(line.c_str(), "%63[^,],%63[^,],%lld,%lld,%lld,%d,%d,%lf", provider, coretype,
                    &m, &n, &k, &ta, &tb, &gflops) == 8)
      results.push_back({provider, coretype, shape_from_row(m, n, k, ta, tb, shapes), gflops});
  }
  return results;
}

// ---- output -------------------------------------------------------------------------------

void print_csv(const std::vector<Result>& results) {
  std::printf("provider,coretype,m,n,k,transpose_a,transpose_b,gflops\n");
  for (const Result& r : results) std::printf("%s\n", csv_row(r).c_str());
}

void print_json(const std::vector<Result>& results, const Options& options) {
  std::printf("{\"threads\": %d, \"min_seconds\": %g, \"weft_selection\": \"%s\",\n",
              options.threads, options.min_seconds, weft::gemm_selection_report().mode.c_str());
  std::printf(" \"results\": [\n");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::printf(
        "  {\"provider\": \"%s\", \"coretype\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, "
        "\"transpose_a\": %s, \"transpose_b\": %s, \"gflops\": %.2f}%s\n",
        r.provider.c_str(), r.coretype.c_str(), (long long)r.shape.m, (long long)r.shape.n,
        (long long)r.shape.k, r.shape.transpose_a ? "true" : "false",
        r.shape.transpose_b ? "true" : "false", r.gflops, i + 1 < results.size() ? "," : "");
  }
  std::printf(" ]}\n");
}

std::string key_of(const Result& r) { return r.provider + "/" + r.coretype; }

// GFLOP/s per provider key per shape.
using Table = std::map<std::string, std::vector<std::pair<GemmShape, double>>>;

double rate_in(const Table& table, const std::string& key, const GemmShape& shape) {
  for (const auto& [s, g] : table.at(key))
    if (s == shape) return g;
  return 0;
}

// Per product: the fastest provider, and the share of it that Weft's own choice reaches.
void summarize_winners(const std::vector<Product>& products, const Table& table,
                       const std::string& default_key) {
  std::fprintf(stderr, "\n%-5s %-5s %-9s %-20s %-26s %8s %8s %6s\n", "N", "rows", "product",
               "m x n x k", "fastest", "GFLOP/s", "weft", "ratio");
  int fastest = 0, within5 = 0;
  for (const Product& p : products) {
    std::string best;
    double best_rate = 0;
    for (const auto& [key, rows] : table)
      if (double g = rate_in(table, key, p.shape); key != default_key && g > best_rate)
        best_rate = g, best = key;
    const double ours = rate_in(table, default_key, p.shape);
    fastest += ours >= best_rate;
    within5 += ours >= 0.95 * best_rate;
    std::fprintf(stderr, "%-5lld %-5lld %-9s %-20s %-26s %8.1f %8.1f %6.2f\n",
                 (long long)p.vector_size, (long long)p.rows, p.name,
                 weft::gemm_shape_label(p.shape).c_str(), best.c_str(), best_rate, ours,
                 ours / best_rate);
  }
  std::fprintf(stderr,
               "Weft's choice (%s) is the fastest at %d of %zu products, within 5%% of "
               "the fastest at %d.\n",
               default_key.c_str(), fastest, products.size(), within5);
}

// Per (N, rows): the flop-weighted ceiling of the forward and training product sets.
void summarize_ceilings(const Table& table, const std::string& default_key) {
  for (bool training : {false, true}) {
    std::fprintf(stderr, "\nceiling GFLOP/s, %s products of one level (combine_gflops):\n%-11s",
                 training ? "training (forward + backward)" : "forward", "N/rows");
    for (const auto& [key, rows] : table) std::fprintf(stderr, " %24s", key.c_str());
    std::fprintf(stderr, "\n");
    for (std::int64_t n : kVectorSizes)
      for (std::int64_t r : kRows) {
        auto shapes = weft::treelstm::tree_lstm_gemm_shapes(r, n, training);
        std::fprintf(stderr, "%5lld/%-5lld", (long long)n, (long long)r);
        for (const auto& [key, rows] : table) {
          std::vector<double> rates;
          for (const GemmShape& s : shapes) rates.push_back(rate_in(table, key, s));
          const bool complete =
              std::all_of(rates.begin(), rates.end(), [](double g) { return g > 0; });
          std::fprintf(stderr, " %23.1f%s", complete ? weft::combine_gflops(shapes, rates) : 0.0,
                       key == default_key ? "*" : " ");
        }
        std::fprintf(stderr, "\n");
      }
  }
  std::fprintf(stderr, "(* = Weft's choice: the provider calibrated for each product's class)\n");
}

}  // namespace

namespace {

// The core clock, from a chain of dependent integer adds (one per cycle on every x86 core):
// what the peak FLOP/s figure in the summary is computed from.
double estimate_clock_ghz() {
#if defined(__x86_64__)
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) {  // the best trial: one not preempted
    constexpr long kIterations = 20'000'000;
    long x = 0;
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < kIterations; ++i)
      asm volatile(
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
          : "+r"(x));
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 8.0 * kIterations / s / 1e9);
  }
  return best;
#else
  return 0;
#endif
}

// One trial of the peak single-precision FMA rate of a core: 12 independent chains of vector
// FMAs (enough to hide the FMA latency), 2 flops per lane. No sgemm can pass this rate.
double fma_peak_trial() {
#if defined(__AVX512F__) || defined(__AVX2__)
#if defined(__AVX512F__)
  using Vec = __m512;
  auto set1 = [](float v) { return _mm512_set1_ps(v); };
  auto fma = [](Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); };
#else
  using Vec = __m256;
  auto set1 = [](float v) { return _mm256_set1_ps(v); };
  auto fma = [](Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); };
#endif
  constexpr int kChains = 12;
  constexpr long kIterations = 10'000'000;
  Vec acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = set1(float(j));
  const Vec scale = set1(0.999f), shift = set1(0.001f);
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = fma(acc[j], scale, shift);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  float lanes[sizeof(Vec) / sizeof(float)];
  float total = 0;
  for (int j = 0; j < kChains; ++j) {  // every chain feeds the result, so none is dead code
    std::memcpy(lanes, &acc[j], sizeof lanes);
    total += lanes[0];
  }
  volatile float sink = total;
  (void)sink;
  return double(kIterations) * kChains * (sizeof(Vec) / sizeof(float)) * 2 / s / 1e9;
#else
  return 0;
#endif
}

// The best of five trials: one not preempted by another process.
double measure_fma_peak_gflops() {
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) best = std::max(best, fma_peak_trial());
  return best;
}

// The core clock and the FMA peak, measured back to back so that their ratio (FLOP/cycle)
// is consistent even when the clock changes between runs.
void print_machine() {
  const double ghz = estimate_clock_ghz();
  const double peak = measure_fma_peak_gflops();
  std::fprintf(stderr,
               "core clock (dependent-add chain): %.2f GHz; FMA peak of one core (measured): "
               "%.1f GFLOP/s = %.1f FLOP/cycle\n",
               ghz, peak, ghz > 0 ? peak / ghz : 0.0);
}

int child_main(const Options& options, const std::vector<GemmShape>& shapes) {
  const std::string coretype = openblas_get_corename();
  for (const Result& r : measure_weft_provider(weft::GemmProvider::kOpenBlas, coretype, shapes,
                                               options.min_seconds, kForcedProvider))
    std::printf("%s\n", csv_row(r).c_str());
  return 0;
}

// Every provider at every shape; notes (skips, coretype mismatches) go to stderr.
std::vector<Result> measure_all(const Options& options, const std::vector<GemmShape>& shapes) {
  std::vector<Result> all;
  auto append = [&all](std::vector<Result> more) {
    all.insert(all.end(), more.begin(), more.end());
  };
  for (weft::GemmProvider p : weft::available_gemm_providers()) {
    const bool onednn = p == weft::GemmProvider::kOneDnn;
    std::fprintf(stderr, "measuring %s...\n", std::string(weft::gemm_provider_name(p)).c_str());
    append(measure_weft_provider(p, onednn ? onednn_isa() : openblas_get_corename(), shapes,
                                 options.min_seconds, std::string(weft::gemm_provider_name(p))));
  }
  Blis blis;
  std::string note;
  if (load_blis(blis, options.threads, note)) {
    std::fprintf(stderr, "measuring BLIS %s (%s, config %s)...\n", blis.version.c_str(),
                 blis.path.c_str(), blis.arch.c_str());
    append(measure_blis(blis, shapes, options.min_seconds));
  } else {
    std::fprintf(stderr, "note: %s\n", note.c_str());
  }
  for (const char* coretype : kForcedCoretypes) {
    std::fprintf(stderr, "measuring OpenBLAS with OPENBLAS_CORETYPE=%s (child process)...\n",
                 coretype);
    std::vector<Result> child = parse_child_csv(run_child(coretype, options), shapes);
    if (!child.empty() && child[0].coretype != coretype)
      std::fprintf(stderr, "note: OPENBLAS_CORETYPE=%s gave core %s\n", coretype,
                   child[0].coretype.c_str());
    append(std::move(child));
  }
  return all;
}

// Weft's choice at every shape: the rate of the provider gemm_provider_for picks (calibrated
// per shape class, unless WEFT_GEMM forces one), from the measurements above.
std::vector<Result> weft_choice(const std::vector<Result>& results,
                                const std::vector<GemmShape>& shapes) {
  std::vector<Result> chosen;
  for (const GemmShape& s : shapes) {
    const std::string provider(weft::gemm_provider_name(weft::gemm_provider_for(s)));
    for (const Result& r : results)
      if (r.provider == provider && r.shape == s)
        chosen.push_back({kWeftChoice, provider, s, r.gflops});
  }
  return chosen;
}

void print_summary(const std::vector<Result>& results, const std::vector<Product>& products,
                   const std::vector<GemmShape>& shapes) {
  Table table;
  for (const Result& r : results) table[key_of(r)].push_back({r.shape, r.gflops});
  for (const Result& r : weft_choice(results, shapes))
    table[kWeftChoice].push_back({r.shape, r.gflops});
  summarize_winners(products, table, kWeftChoice);
  summarize_ceilings(table, kWeftChoice);
  std::fprintf(stderr, "\n");
  print_machine();
}

// dx = dy · Wᵀ two ways, each provider: reading W transposed (NT) and reading the weight's
// transposed copy untransposed (NN, what backward does where gemm_prefers_untransposed_copy says),
// at the SST Tree-LSTM composer's W [300, 750] and the ICLR benchmark's W1 [N, 4N] at N = 128
// and 1024. CSV on stdout.
void print_weight_transposes(double min_seconds) {
  struct Weight {
    const char* name;
    std::int64_t in, out;
  };
  const Weight weights[] = {
      {"sst_composer", 300, 750}, {"iclr_w1_128", 128, 512}, {"iclr_w1_1024", 1024, 4096}};
  std::printf("weight,rows,provider,nt_gflops,nn_gflops,nn_over_nt\n");
  for (const Weight& w : weights)
    for (std::int64_t rows : {1, 2, 4, 8, 16, 25, 64, 256}) {
      const GemmShape nt{rows, w.in, w.out, false, true, false};
      const GemmShape nn{rows, w.in, w.out, false, false, false};
      for (weft::GemmProvider p : weft::available_gemm_providers()) {
        const double a = weft::measure_sgemm_gflops(nt, p, min_seconds);
        const double b = weft::measure_sgemm_gflops(nn, p, min_seconds);
        std::printf("%s,%lld,%s,%.2f,%.2f,%.3f\n", w.name, (long long)rows,
                    std::string(weft::gemm_provider_name(p)).c_str(), a, b, b / a);
        std::fflush(stdout);
      }
    }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"sgemm GFLOP/s of oneDNN, OpenBLAS (per core type) and BLIS at Tree-LSTM shapes"};
  app.add_option("--threads", options.threads, "threads per provider")->check(CLI::PositiveNumber);
  app.add_option("--min-seconds", options.min_seconds, "timed seconds per shape and provider");
  app.add_option("--format", options.format, "csv or json")->check(CLI::IsMember({"csv", "json"}));
  app.add_flag("--child", options.child, "internal: OpenBLAS only, CSV rows")->group("");
  app.add_flag("--machine", options.machine_only, "print the core clock and FMA peak only");
  bool weight_transposes = false;
  app.add_flag("--weight-transposes", weight_transposes,
               "dy · Wᵀ reading W transposed against reading its transposed copy, CSV");
  CLI11_PARSE(app, argc, argv);

  weft::set_num_threads(options.threads);
  if (options.machine_only) {
    print_machine();
    return 0;
  }
  if (weight_transposes) {
    print_weight_transposes(options.min_seconds);
    return 0;
  }
  const std::vector<Product> products = all_products();
  const std::vector<GemmShape> shapes = distinct_shapes(products);
  if (options.child) return child_main(options, shapes);

  const auto start = std::chrono::steady_clock::now();
  std::fprintf(stderr, "%zu shapes, %d thread(s), %.2f s each; %s\n", shapes.size(),
               options.threads, options.min_seconds,
               std::string(weft::cpu_backend_summary()).c_str());
  const std::vector<Result> results = measure_all(options, shapes);
  if (options.format == "json")
    print_json(results, options);
  else
    print_csv(results);
  std::fflush(stdout);
  print_summary(results, products, shapes);
  std::fprintf(stderr, "total %.1f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}
