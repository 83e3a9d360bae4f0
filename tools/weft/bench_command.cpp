// `weft bench treelstm`: the ICLR 2017 benchmark (bench/treelstm/tree_benchmark.h) from
// the command line: binds the options, runs the rows, prints or writes them as a table, CSV or
// JSON, draws the SVG plot (also from saved JSON runs, --from-json), and with --export writes
// the trees and weights that bench/peers/side_by_side.py feeds to PyTorch, with Weft's loss
// on them for the cross-check.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "bench_output.h"
#include "commands.h"
#include "treelstm/tree_benchmark.h"
#include "weft/core/error.h"

namespace weft::tool {
namespace {

constexpr const char* kFooter = R"(
CSV schema (stable; header row exactly):
  mode,model,tree_type,vector_size,batch_size,phase,trees_per_s,batch_s_min,batch_s_median,
  batch_s_max,weave_s,speedup_vs_unbatched,ratio_vs_manual,gemm_fraction,peak_rss_mb,run_s,
  weave_ahead,kernel_calls,launches,host_to_device,synchronizations
mode: unbatched | manual | dynamic | full-dynamic; phase: train | infer.
A batch's time (batch_s_*) = weave_s + execution (run_s): forward, and when training ½Σy² over
the root outputs, backward and the SGD update (lr 1e-5); with --weave-ahead on (dynamic and
full-dynamic; weave_ahead 1) the next batch is woven while this one runs, and a batch's time is
from the end of the batch before. weave_s (median) = weaving + scheduling + the batch's plan
(its packed upload, loom/batch_plan.h; loom modes; 0 for manual, whose gather plan is built
once per shape, untimed); run_s (median) = execution.
kernel_calls, launches, host_to_device, synchronizations: medians per batch of what the
execution asked of the backend (kernels on any device; on CUDA kernel launches and cuBLAS
calls, host-to-device copies, waits for the device). Trees are made
before the clock starts. One untimed warm-up batch, then --repeats timed batches (below batch
32: int(32/B) x repeats); trees_per_s = batch_size / batch_s_median. unbatched times at most
--max-unbatched-trees trees of each batch and scales the time to the batch.
speedup_vs_unbatched = trees_per_s / unbatched's at the same (or nearest) batch size;
ratio_vs_manual = batch_s_median / manual's at the same batch size (empty when not run).
gemm_fraction = model GEMM GFLOP/s (12N^2 per node tree-lstm, 4N^2 tree-fc, x3 training) over
the sgemm ceiling (cuBLAS's with --device cuda) measured in this process at the products the
row made (call sizes rounded to powers of two up to 1024). peak_rss_mb: VmHWM (host memory),
reset before each row.)";

treelstm::TreeBenchmarkOptions to_options(const BenchTreeOptions& o) {
  treelstm::TreeBenchmarkOptions options;
  options.cell = treelstm::parse_cell(o.model);
  options.tree_type = treelstm::parse_tree_type(o.tree_type);
  options.tree_size = o.tree_size;
  options.vector_sizes = o.vector_sizes;
  options.batch_sizes = o.batch_sizes;
  options.modes.clear();
  for (const std::string& m : o.modes) options.modes.push_back(treelstm::parse_bench_mode(m));
  options.train = !o.infer;
  options.threads = o.threads;
  options.repeats = o.repeats;
  options.seed = o.seed;
  options.max_unbatched_trees = o.max_unbatched_trees;
  options.ceiling_seconds = o.ceiling_seconds;
  options.profile = o.profile;
  options.max_step_rows = o.max_step_rows;
  options.weave_ahead = o.weave_ahead == "on";
  options.weave_threads = o.weave_threads;
  options.device = parse_device(o.device);
  return options;
}

// Trees, weights and Weft's loss on the check batch, for bench/peers/side_by_side.py.
void export_for_peers(const treelstm::TreeBenchmarkOptions& options, const std::string& dir) {
  const auto checks = treelstm::export_tree_benchmark(options, dir);
  nlohmann::json doc = nlohmann::json::array();
  for (const auto& c : checks)
    doc.push_back({{"vector_size", c.vector_size}, {"loss", c.loss}, {"grad_sq", c.grad_sq}});
  write_text(dir + "/check.json", doc.dump(2) + "\n", "cross-check");
  std::fprintf(stderr, "exported trees, weights and check.json to %s\n", dir.c_str());
}

// The rows of saved `--format json` runs, in order.
std::vector<treelstm::TreeBenchmarkRow> load_rows(const std::vector<std::string>& paths) {
  std::vector<treelstm::TreeBenchmarkRow> rows;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in) fail("bench", "cannot read the JSON file '", path, "'");
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    for (const auto& r : treelstm::tree_benchmark_rows_from_json(text)) rows.push_back(r);
  }
  return rows;
}

}  // namespace

CLI::App* add_bench_treelstm(CLI::App& bench, BenchTreeOptions& o) {
  CLI::App* cmd = bench.add_subcommand(
      "treelstm",
      "The ICLR 2017 dynamic-batching benchmark: unbatched, manual, dynamic and "
      "full-dynamic on binary trees, side by side");
  cmd->footer(kFooter);
  cmd->add_option("--model", o.model, "tree-lstm or tree-fc")->capture_default_str();
  cmd->add_option("--tree-type", o.tree_type, "random, balanced or sequence")
      ->capture_default_str();
  cmd->add_option("--tree-size", o.tree_size, "Leaves per tree")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--vector-size", o.vector_sizes, "Hidden vector sizes (comma-separated)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 16));
  cmd->add_option("--batch-sizes", o.batch_sizes, "Trees per batch (comma-separated)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--modes", o.modes, "unbatched, manual, dynamic, full-dynamic (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  auto* train = cmd->add_flag("--train", o.train, "Time training steps (the default)");
  cmd->add_flag("--infer", o.infer, "Time inference (forward only) instead")->excludes(train);
  cmd->add_option("--threads", o.threads, "GEMM threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--repeats", o.repeats, "Timed batches per row (x int(32/B) below batch 32)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", o.seed, "Seed of the trees and weights")->capture_default_str();
  cmd->add_option("--max-unbatched-trees", o.max_unbatched_trees,
                  "unbatched: trees timed per batch (time scaled to the batch)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ceiling-seconds", o.ceiling_seconds,
                  "Seconds per GEMM shape for the sgemm ceiling (0: skip, gemm_fraction empty)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60.0));
  cmd->add_option("--max-step-rows", o.max_step_rows,
                  "Loom modes: split steps of more calls into batched calls of at most this many "
                  "rows, keeping a level's arrays in cache (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1u << 30));
  cmd->add_option("--weave-ahead", o.weave_ahead,
                  "Dynamic and full-dynamic: on, weave and schedule the next batch on other "
                  "threads while this one runs; off, weave each batch, then run it")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--weave-threads", o.weave_threads,
                  "Threads weaving one batch (shards of its trees, appended in order)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--device", o.device,
                  "Where the model runs: cpu, or cuda (a build with the CUDA backend and a GPU; "
                  "the ceiling is then cuBLAS's at the row's products)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--format", o.format, "table, csv or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json"}));
  cmd->add_option("--out", o.out_file, "Write the rows to this file instead of stdout");
  cmd->add_option("--plot", o.plot_file, "Write an SVG of speedup against batch size per mode");
  cmd->add_option("--export", o.export_dir,
                  "Also write trees.safetensors, weights_V<N>.safetensors and check.json to this "
                  "(existing) directory, for bench/peers/side_by_side.py");
  cmd->add_option("--from-json", o.from_json,
                  "Run nothing: re-render the rows of these saved --format json files "
                  "(comma-separated, merged in order) as --format / --plot say")
      ->delimiter(',');
  cmd->add_flag("--profile", o.profile,
                "Also time the execution's kernels by kind (products, gathers, scatters, "
                "elementwise, reductions, optimizer, allocation; forward / backward) with the "
                "bytes the gathers and scatters wrote: printed after the rows (table), or each "
                "row's \"profile\" (json)");
  cmd->add_flag("--quiet", o.quiet, "No progress lines on stderr");
  return cmd;
}

int run_bench_treelstm(const BenchTreeOptions& o) {
  const treelstm::TreeBenchmarkOptions options = to_options(o);
  check_writable(o.out_file, "output");
  check_writable(o.plot_file, "plot");
  std::vector<treelstm::TreeBenchmarkRow> rows;
  if (!o.from_json.empty()) {
    rows = load_rows(o.from_json);
  } else {
    if (!o.export_dir.empty()) export_for_peers(options, o.export_dir);
    treelstm::ProgressFn progress;
    if (!o.quiet) progress = [](const std::string& line) { std::cerr << line << std::endl; };
    rows = treelstm::run_tree_benchmark(options, progress);
  }
  std::string text = o.format == "csv" ? treelstm::tree_benchmark_csv(rows)
                     : o.format == "json"
                         ? (o.from_json.empty() ? treelstm::tree_benchmark_json(rows, options)
                                                : treelstm::tree_benchmark_json(rows))
                         : treelstm::tree_benchmark_table(rows);
  if (o.profile && o.format == "table") text += "\n" + treelstm::tree_benchmark_profile_table(rows);
  if (o.out_file.empty())
    std::cout << text << std::flush;
  else
    write_text(o.out_file, text, "output");
  if (!o.plot_file.empty()) write_text(o.plot_file, treelstm::tree_benchmark_svg(rows), "plot");
  return 0;
}

}  // namespace weft::tool
