// Every named enum's vocabulary (weft/core/named_enum.h): the names the command line, settings
// and checkpoints use, in table order; each name parses back to the value that prints it; and
// an unknown name fails naming what was parsed and every accepted name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "treelstm/iclr_benchmark.h"
#include "treelstm/tree_benchmark.h"
#include "weft/backend/cpu.h"
#include "weft/core/denormals.h"
#include "weft/core/error.h"
#include "weft/core/named_enum.h"
#include "weft/loom/schedule.h"
#include "weft/models/molecule_data.h"
#include "weft/nn/fc.h"
#include "weft/tensor/dtype.h"
#include "weft/train/optimizer.h"
#include "weft/train/schedule.h"
#include "weft/train/trainer.h"

namespace weft {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// `names` are the vocabulary's, in order; parse(name(v)) == v for each; `unknown` lists them.
template <typename Enum>
void expect_vocabulary(Enum (*parse)(std::string_view), std::string_view (*name)(Enum),
                       const std::vector<std::string>& names, const std::string& unknown) {
  EXPECT_EQ(enum_names<Enum>(), names);
  for (const std::string& text : names) {
    const Enum value = parse(text);
    EXPECT_EQ(name(value), text);
    EXPECT_EQ(enum_name(value), text);
  }
  EXPECT_THAT([&] { parse("no-such-name"); },
              ThrowsMessage<Error>(HasSubstr("unknown " + unknown + " 'no-such-name'; expected ")));
  std::string listed;
  for (std::size_t i = 0; i < names.size(); ++i)
    listed += (i == 0 ? "" : (i + 1 == names.size() ? " or " : ", ")) + names[i];
  EXPECT_THAT([&] { parse(""); }, ThrowsMessage<Error>(HasSubstr("; expected " + listed)));
}

TEST(NamedEnums, EveryVocabularyRoundTripsAndListsItsNames) {
  expect_vocabulary(loom::parse_strategy, loom::strategy_name,
                    {"by_depth", "sinks_last", "agenda", "none"}, "strategy");
  expect_vocabulary(nn::parse_activation, nn::activation_name, {"none", "relu", "tanh", "sigmoid"},
                    "activation");
  expect_vocabulary(parse_denormal_mode, denormal_mode_name, {"flush", "keep"}, "denormal mode");
  expect_vocabulary(parse_device, device_name, {"cpu", "cuda"}, "device");
  expect_vocabulary(train::parse_split, train::split_name, {"train", "dev", "test"}, "split");
  expect_vocabulary(train::parse_optimizer_kind, train::optimizer_kind_name,
                    {"sgd", "adagrad", "adam"}, "optimizer");
  expect_vocabulary(train::parse_weight_decay_mode, train::weight_decay_mode_name,
                    {"l2", "decoupled"}, "weight decay mode");
  expect_vocabulary(train::parse_sparse_update, train::sparse_update_name, {"lazy", "dense"},
                    "sparse update");
  expect_vocabulary(train::parse_schedule_kind, train::schedule_kind_name,
                    {"constant", "step", "exponential", "cosine"}, "learning-rate schedule");
  expect_vocabulary(train::parse_best_mode, train::best_mode_name, {"max", "min"}, "best mode");
  expect_vocabulary(train::parse_progress_mode, train::progress_mode_name,
                    {"auto", "bar", "lines", "off"}, "progress mode");
  expect_vocabulary(models::parse_molecule_task, models::molecule_task_name, {"esol", "tox21"},
                    "task");
  expect_vocabulary(treelstm::parse_tree_type, treelstm::tree_type_name,
                    {"random", "balanced", "sequence"}, "tree type");
  expect_vocabulary(treelstm::parse_cell, treelstm::cell_name, {"tree-lstm", "tree-fc"}, "model");
  expect_vocabulary(treelstm::parse_bench_mode, treelstm::bench_mode_name,
                    {"unbatched", "manual", "dynamic", "full-dynamic"}, "mode");
}

// The GEMM providers: the same table, and "auto" refused with its own reason.
TEST(NamedEnums, GemmProvidersRefuseAuto) {
  EXPECT_EQ(enum_names<GemmProvider>(), (std::vector<std::string>{"onednn", "openblas"}));
  for (GemmProvider p : {GemmProvider::kOneDnn, GemmProvider::kOpenBlas})
    EXPECT_EQ(parse_gemm_provider(gemm_provider_name(p)), p);
  EXPECT_THAT([] { parse_gemm_provider("auto"); },
              ThrowsMessage<Error>(HasSubstr("'auto' is not a provider")));
  EXPECT_THAT([] { parse_gemm_provider("mkl"); },
              ThrowsMessage<Error>(HasSubstr("expected onednn or openblas")));
}

// A value outside the list (cast from a number) has no name rather than another's.
TEST(NamedEnums, AValueOutsideTheListIsUnnamed) {
  EXPECT_EQ(enum_name(static_cast<loom::Strategy>(17)), "?");
}

}  // namespace
}  // namespace weft
