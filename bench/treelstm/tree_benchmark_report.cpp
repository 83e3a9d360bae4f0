// Rendering benchmark rows: the stable CSV schema, JSON (rows plus the options and backend
// that produced them; read back to re-render saved runs), an aligned text table, and an SVG
// plot of speedup against batch size per mode in the style of the paper's figure.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "treelstm/tree_benchmark.h"
#include "weft/backend/cpu.h"
#include "weft/core/build_info.h"
#include "weft/core/error.h"

namespace weft::treelstm {
namespace {

std::string_view phase_name(bool train) { return train ? "train" : "infer"; }

// A number for CSV: empty when missing (NaN), else shortest round-trip-ish form.
std::string field(double value) { return std::isfinite(value) ? fmt::format("{:.6g}", value) : ""; }

nlohmann::json number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace

std::string tree_benchmark_csv(std::span<const TreeBenchmarkRow> rows) {
  std::string out(kTreeBenchmarkCsvHeader);
  out += "\n";
  for (const TreeBenchmarkRow& r : rows)
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                       bench_mode_name(r.mode), cell_name(r.cell), tree_type_name(r.tree_type),
                       r.vector_size, r.batch_size, phase_name(r.train), field(r.trees_per_s),
                       field(r.batch_s_min), field(r.batch_s_median), field(r.batch_s_max),
                       field(r.weave_s), field(r.speedup_vs_unbatched), field(r.ratio_vs_manual),
                       field(r.gemm_fraction), field(r.peak_rss_mb), field(r.run_s),
                       r.weave_ahead ? 1 : 0, field(r.kernel_calls), field(r.launches),
                       field(r.host_to_device), field(r.synchronizations));
  return out;
}

namespace {

// {"forward": {"products": {"seconds": s, "calls": n, "bytes": b}, ...}, "backward": ...}; null
// for a row run without profiling.
nlohmann::json profile_json(const TreeBenchmarkRow& r) {
  if (r.profile.seconds() == 0) return nullptr;
  nlohmann::json out;
  for (bool backward : {false, true}) {
    nlohmann::json& pass = out[backward ? "backward" : "forward"];
    for (const auto& [kind, name] : weft_enum_names(WorkKind{})) {
      const WorkTime& t = r.profile.of(backward, kind);
      pass[std::string(name)] = {
          {"seconds", number(t.seconds)}, {"calls", t.calls}, {"bytes", t.bytes}};
    }
  }
  out["unprofiled_seconds"] = number(r.unprofiled_s);
  return out;
}

// profile_json's inverse (a null profile leaves the row's empty).
void read_profile(const nlohmann::json& j, TreeBenchmarkRow& r) {
  if (j.is_null()) return;
  for (bool backward : {false, true}) {
    const nlohmann::json& pass = j.at(backward ? "backward" : "forward");
    for (const auto& [kind, name] : weft_enum_names(WorkKind{})) {
      const nlohmann::json& t = pass.at(std::string(name));
      WorkTime& time = r.profile.of(backward, kind);
      time.seconds = t.at("seconds").get<double>();
      time.calls = t.at("calls").get<std::int64_t>();
      time.bytes = t.at("bytes").get<std::int64_t>();
    }
  }
  r.unprofiled_s = j.at("unprofiled_seconds").get<double>();
}

nlohmann::json rows_json(std::span<const TreeBenchmarkRow> rows) {
  nlohmann::json list = nlohmann::json::array();
  for (const TreeBenchmarkRow& r : rows)
    list.push_back({{"mode", bench_mode_name(r.mode)},
                    {"model", cell_name(r.cell)},
                    {"tree_type", tree_type_name(r.tree_type)},
                    {"vector_size", r.vector_size},
                    {"batch_size", r.batch_size},
                    {"phase", phase_name(r.train)},
                    {"trees_per_s", number(r.trees_per_s)},
                    {"batch_s_min", number(r.batch_s_min)},
                    {"batch_s_median", number(r.batch_s_median)},
                    {"batch_s_max", number(r.batch_s_max)},
                    {"weave_s", number(r.weave_s)},
                    {"speedup_vs_unbatched", number(r.speedup_vs_unbatched)},
                    {"ratio_vs_manual", number(r.ratio_vs_manual)},
                    {"gemm_fraction", number(r.gemm_fraction)},
                    {"peak_rss_mb", number(r.peak_rss_mb)},
                    {"run_s", number(r.run_s)},
                    {"weave_ahead", r.weave_ahead},
                    {"kernel_calls", number(r.kernel_calls)},
                    {"launches", number(r.launches)},
                    {"host_to_device", number(r.host_to_device)},
                    {"synchronizations", number(r.synchronizations)},
                    {"gemm_gflops", number(r.gemm_gflops)},
                    {"ceiling_gflops", number(r.ceiling_gflops)},
                    {"loss", number(r.loss)},
                    {"trees_timed", r.trees_timed},
                    {"profile", profile_json(r)}});
  return list;
}

}  // namespace

std::string tree_benchmark_json(std::span<const TreeBenchmarkRow> rows) {
  nlohmann::json doc;
  doc["benchmark"] = "treelstm";
  doc["rows"] = rows_json(rows);
  return doc.dump(2) + "\n";
}

std::string tree_benchmark_json(std::span<const TreeBenchmarkRow> rows,
                                const TreeBenchmarkOptions& options) {
  nlohmann::json doc;
  doc["benchmark"] = "treelstm";
  doc["commit"] = build_commit();  // the build measured (weft --version), wherever it ran
  doc["backend"] = std::string(cpu_backend_summary());
  doc["options"] = {{"model", cell_name(options.cell)},
                    {"tree_type", tree_type_name(options.tree_type)},
                    {"tree_size", options.tree_size},
                    {"vector_sizes", options.vector_sizes},
                    {"batch_sizes", options.batch_sizes},
                    {"phase", phase_name(options.train)},
                    {"device", std::string(device_name(options.device))},
                    {"threads", options.threads},
                    {"repeats", options.repeats},
                    {"seed", options.seed},
                    {"max_unbatched_trees", options.max_unbatched_trees},
                    {"max_step_rows", options.max_step_rows},
                    {"weave_ahead", options.weave_ahead},
                    {"weave_threads", options.weave_threads},
                    {"learning_rate", options.learning_rate}};
  doc["rows"] = rows_json(rows);
  return doc.dump(2) + "\n";
}

std::vector<TreeBenchmarkRow> tree_benchmark_rows_from_json(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.contains("rows") || !doc["rows"].is_array())
    fail("bench", "not the JSON of `weft bench treelstm --format json` (no \"rows\" array)");
  auto num = [](const nlohmann::json& v) { return v.is_number() ? v.get<double>() : NAN; };
  std::vector<TreeBenchmarkRow> rows;
  for (const nlohmann::json& j : doc["rows"]) {
    try {
      TreeBenchmarkRow r;
      r.mode = parse_bench_mode(j.at("mode").get<std::string>());
      r.cell = parse_cell(j.at("model").get<std::string>());
      r.tree_type = parse_tree_type(j.at("tree_type").get<std::string>());
      r.vector_size = j.at("vector_size").get<std::int64_t>();
      r.batch_size = j.at("batch_size").get<int>();
      r.train = j.at("phase").get<std::string>() == "train";
      r.trees_per_s = num(j.at("trees_per_s"));
      r.batch_s_min = num(j.at("batch_s_min"));
      r.batch_s_median = num(j.at("batch_s_median"));
      r.batch_s_max = num(j.at("batch_s_max"));
      r.weave_s = num(j.at("weave_s"));
      r.speedup_vs_unbatched = num(j.at("speedup_vs_unbatched"));
      r.ratio_vs_manual = num(j.at("ratio_vs_manual"));
      r.gemm_fraction = num(j.at("gemm_fraction"));
      r.peak_rss_mb = num(j.at("peak_rss_mb"));
      r.run_s = num(j.value("run_s", nlohmann::json()));  // absent before weaving ahead
      r.weave_ahead = j.value("weave_ahead", false);
      r.kernel_calls = num(j.value("kernel_calls", nlohmann::json()));
      r.launches = num(j.value("launches", nlohmann::json()));
      r.host_to_device = num(j.value("host_to_device", nlohmann::json()));
      r.synchronizations = num(j.value("synchronizations", nlohmann::json()));
      r.gemm_gflops = num(j.value("gemm_gflops", nlohmann::json()));
      r.ceiling_gflops = num(j.value("ceiling_gflops", nlohmann::json()));
      r.loss = num(j.value("loss", nlohmann::json()));
      r.trees_timed = j.value("trees_timed", 0);
      read_profile(j.value("profile", nlohmann::json()), r);
      rows.push_back(r);
    } catch (const nlohmann::json::exception& e) {
      fail("bench", "row ", rows.size(), " of the JSON is malformed: ", e.what());
    }
  }
  return rows;
}

std::string tree_benchmark_table(std::span<const TreeBenchmarkRow> rows) {
  std::string out = fmt::format(
      "{:<13} {:>5} {:>5} {:<5} {:>10} {:>9} {:>9} {:>9} {:>7} {:>6} {:>9} {:>8} {:>6} {:>8}\n",
      "mode", "V", "B", "phase", "trees/s", "batch_min", "batch_med", "batch_max", "weave%", "run%",
      "x_unbatch", "x_manual", "gemm%", "rss_MB");
  auto opt = [](double v, const char* spec) {
    return std::isfinite(v) ? fmt::format(fmt::runtime(spec), v) : std::string("-");
  };
  for (const TreeBenchmarkRow& r : rows)
    out += fmt::format(
        "{:<13} {:>5} {:>5} {:<5} {:>10.2f} {:>9.4f} {:>9.4f} {:>9.4f} {:>7.2f} {:>6} {:>9} {:>8} "
        "{:>6} {:>8.0f}\n",
        bench_mode_name(r.mode), r.vector_size, r.batch_size, phase_name(r.train), r.trees_per_s,
        r.batch_s_min, r.batch_s_median, r.batch_s_max, 100.0 * r.weave_s / r.batch_s_median,
        opt(100.0 * r.run_s / r.batch_s_median, "{:.1f}"), opt(r.speedup_vs_unbatched, "{:.2f}"),
        opt(r.ratio_vs_manual, "{:.3f}"), opt(100.0 * r.gemm_fraction, "{:.1f}"), r.peak_rss_mb);
  return out;
}

std::string tree_benchmark_profile_table(std::span<const TreeBenchmarkRow> rows) {
  std::string out =
      fmt::format("{:<13} {:>5} {:>5} {:<5} {:>9}", "mode", "V", "B", "phase", "batch_ms");
  for (const auto& [kind, name] : weft_enum_names(WorkKind{}))
    out += fmt::format(" {:>15}", fmt::format("{} f/b", name.substr(0, 9)));
  out += fmt::format(" {:>9} {:>9} {:>11} {:>12} {:>9}\n", "other_ms", "weave_ms", "gathered_MB",
                     "scattered_MB", "copied_MB");
  for (const TreeBenchmarkRow& r : rows) {
    out += fmt::format("{:<13} {:>5} {:>5} {:<5} {:>9.3f}", bench_mode_name(r.mode), r.vector_size,
                       r.batch_size, phase_name(r.train), 1e3 * r.batch_s_median);
    for (const auto& [kind, name] : weft_enum_names(WorkKind{}))
      out += fmt::format(" {:>15}",
                         fmt::format("{:.2f}/{:.2f}", 1e3 * r.profile.of(false, kind).seconds,
                                     1e3 * r.profile.of(true, kind).seconds));
    const auto megabytes = [&](WorkKind kind) {
      return 1e-6 * double(r.profile.of(false, kind).bytes + r.profile.of(true, kind).bytes);
    };
    out += fmt::format(" {:>9.3f} {:>9.3f} {:>11.2f} {:>12.2f} {:>9.2f}\n", 1e3 * r.unprofiled_s,
                       1e3 * r.weave_s, megabytes(WorkKind::kGather), megabytes(WorkKind::kScatter),
                       megabytes(WorkKind::kCopy));
  }
  return out;
}

namespace {

constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                    "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

struct Plot {
  double left = 70, top = 40, width = 560, height = 360;
  double x_lo, x_hi, y_lo, y_hi;  // log10 ranges
  double x(double v) const { return left + (std::log10(v) - x_lo) / (x_hi - x_lo) * width; }
  double y(double v) const {
    return top + height - (std::log10(v) - y_lo) / (y_hi - y_lo) * height;
  }
};

// Gridlines and labels at 1, 2 and 5 times each power of ten (y) and at each batch size (x).
std::string axes(const Plot& p, const std::vector<int>& batches, const std::string& y_label) {
  std::string out = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#000\"/>\n",
      p.left, p.top, p.width, p.height);
  for (int b : batches)
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"11\">{}</text>\n",
        p.x(b), p.top + p.height + 16, b);
  for (double e = std::floor(p.y_lo); e <= std::ceil(p.y_hi); e += 1)
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, e);
      if (std::log10(v) < p.y_lo - 1e-9 || std::log10(v) > p.y_hi + 1e-9) continue;
      out += fmt::format(
          "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n"
          "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"11\">{:g}</text>\n",
          p.left, p.y(v), p.left + p.width, p.y(v), p.left - 6, p.y(v) + 4, v);
    }
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\">batch size</text>\n"
      "<text x=\"16\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" "
      "transform=\"rotate(-90 16 {})\">{}</text>\n",
      p.left + p.width / 2, p.top + p.height + 34, p.top + p.height / 2, p.top + p.height / 2,
      y_label);
  return out;
}

}  // namespace

std::string tree_benchmark_svg(std::span<const TreeBenchmarkRow> rows) {
  bool speedup = false;
  for (const TreeBenchmarkRow& r : rows) speedup |= std::isfinite(r.speedup_vs_unbatched);
  auto value = [&](const TreeBenchmarkRow& r) {
    return speedup ? r.speedup_vs_unbatched : r.trees_per_s;
  };
  std::map<std::pair<std::int64_t, int>, std::vector<const TreeBenchmarkRow*>> series;
  std::vector<int> batches;
  double lo = INFINITY, hi = -INFINITY;
  for (const TreeBenchmarkRow& r : rows) {
    if (!(value(r) > 0)) continue;
    series[{r.vector_size, int(r.mode)}].push_back(&r);
    batches.push_back(r.batch_size);
    lo = std::min(lo, value(r));
    hi = std::max(hi, value(r));
  }
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  Plot p;
  p.x_lo = batches.empty() ? 0 : std::log10(batches.front()) - 0.1;
  p.x_hi = batches.empty() ? 1 : std::log10(batches.back()) + 0.1;
  p.y_lo = std::isfinite(lo) ? std::floor(std::log10(lo) * 4) / 4 : 0;
  p.y_hi = std::isfinite(hi) ? std::max(p.y_lo + 0.5, std::ceil(std::log10(hi) * 4) / 4) : 1;
  const std::string title =
      rows.empty() ? ""
                   : fmt::format("{} on {} trees, {}: {}", cell_name(rows[0].cell),
                                 tree_type_name(rows[0].tree_type), phase_name(rows[0].train),
                                 speedup ? "speedup against unbatched" : "trees per second");
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"820\" height=\"460\" "
      "font-family=\"sans-serif\">\n<text x=\"{}\" y=\"24\" font-size=\"14\">{}</text>\n",
      p.left, title);
  out += axes(p, batches, speedup ? "speedup vs unbatched (x)" : "trees/s");
  int k = 0;
  for (const auto& [key, points] : series) {
    std::vector<const TreeBenchmarkRow*> sorted = points;
    std::sort(sorted.begin(), sorted.end(),
              [](auto* a, auto* b) { return a->batch_size < b->batch_size; });
    const char* colour = kColours[k % 8];
    std::string coords;
    for (const TreeBenchmarkRow* r : sorted)
      coords += fmt::format("{:.1f},{:.1f} ", p.x(r->batch_size), p.y(value(*r)));
    out += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n"
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"{}\">{} V={}</text>\n",
        colour, coords, p.left + p.width + 12, p.top + 14 + 18 * k, colour,
        bench_mode_name(BenchMode(key.second)), key.first);
    ++k;
  }
  return out + "</svg>\n";
}

}  // namespace weft::treelstm
