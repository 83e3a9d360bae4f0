// Model construction and default recipes for the command line. The recipes follow the
// papers: sentiment is Tai et al.'s (Adagrad 0.05, batch 25, L2 1e-4), the calculator a
// small Adam run that finishes in the README's two minutes.
#include "model_factory.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "weft/core/error.h"
#include "weft/models/attention.h"
#include "weft/models/calculator.h"
#include "weft/models/langid.h"
#include "weft/models/molecules.h"
#include "weft/models/sentiment.h"
#include "weft/train/checkpoint.h"

namespace weft::tool {
namespace {

void report_skipped(const std::string& model, const std::vector<std::string>& skipped) {
  if (skipped.empty()) return;
  fmt::print(stderr, "{}: skipped {} bad records (--bad-records skip):\n", model, skipped.size());
  for (const std::string& record : skipped) fmt::print(stderr, "  {}\n", record);
}

std::unique_ptr<models::Model> make_attention(const ModelOptions& options) {
  models::AttentionOptions o;
  o.data_dir = options.data_dir;
  if (!options.no_embeddings) {
    o.embeddings_path = options.embeddings.empty()
                            ? options.data_dir + "/glove-sst/glove.6B.100d.sst.txt"
                            : options.embeddings;
  }
  o.train_embeddings = options.no_embeddings;  // frozen GloVe unless there are none
  if (options.hidden > 0) o.hidden = options.hidden;
  o.max_train_trees = options.max_train;
  o.max_eval_trees = options.max_eval;
  o.skip_bad_records = options.bad_records != "reject";
  o.seed = options.seed;
  o.weave_threads = options.weave_threads;
  auto model = std::make_unique<models::AttentionModel>(o);
  report_skipped("attention", model->skipped());
  return model;
}

std::unique_ptr<models::Model> make_langid(const ModelOptions& options) {
  models::LangIdOptions o;
  o.data_dir = options.data_dir + "/tatoeba-langid";
  if (options.hidden > 0) o.hidden = options.hidden;
  o.max_train = options.max_train;
  o.max_eval = options.max_eval;
  o.skip_bad_records = options.bad_records != "reject";
  o.seed = options.seed;
  o.weave_threads = options.weave_threads;
  auto model = std::make_unique<models::LangIdModel>(o);
  fmt::print(stderr, "langid: removed {} test sentences that also occur in training\n",
             model->overlap_removed());
  report_skipped("langid", model->skipped());
  return model;
}

std::unique_ptr<models::Model> make_molecules(const ModelOptions& options) {
  models::MoleculeOptions o;
  o.data_dir = options.data_dir;
  o.task = models::parse_molecule_task(options.task);
  o.bad_records = options.bad_records == "reject" ? io::OnBadRow::kReject : io::OnBadRow::kSkip;
  if (options.hidden > 0) o.hidden = options.hidden;
  o.max_train = options.max_train;
  o.max_eval = options.max_eval;
  o.seed = options.seed;
  o.weave_threads = options.weave_threads;
  auto model = std::make_unique<models::MoleculeModel>(o);
  report_skipped("molecules", model->skipped_records());
  return model;
}

}  // namespace

std::unique_ptr<models::Model> make_model(const ModelOptions& options) {
  if (options.name == "calculator") {
    models::CalculatorOptions o;
    if (options.hidden > 0) o.hidden = options.hidden;
    if (options.max_train > 0) o.train_examples = options.max_train;
    if (!options.for_training) o.train_examples = 0;
    if (options.max_eval > 0) o.eval_examples = options.max_eval;
    o.seed = options.seed;
    return std::make_unique<models::CalculatorModel>(o);
  }
  if (options.name == "sentiment") {
    models::SentimentOptions o;
    o.data_dir = options.data_dir;
    if (!options.no_embeddings) {
      o.embeddings_path = options.embeddings.empty()
                              ? options.data_dir + "/glove-sst/glove.6B.100d.sst.txt"
                              : options.embeddings;
    }
    o.train_embeddings = !options.freeze_embeddings || options.no_embeddings;
    if (options.hidden > 0) o.hidden = options.hidden;
    if (options.dropout >= 0) o.input_dropout = o.output_dropout = options.dropout;
    if (options.recurrent_dropout >= 0) o.recurrent_dropout = options.recurrent_dropout;
    o.max_train_trees = options.max_train;
    o.max_eval_trees = options.max_eval;
    o.seed = options.seed;
    o.weave_threads = options.weave_threads;
    return std::make_unique<models::SentimentModel>(o);
  }
  if (options.name == "attention") return make_attention(options);
  if (options.name == "langid") return make_langid(options);
  if (options.name == "molecules") return make_molecules(options);
  fail("weft", "unknown model '", options.name,
       "' (known: calculator, sentiment, attention, langid, molecules)");
}

train::TrainerOptions training_recipe(const TrainOptions& options) {
  train::TrainerOptions t;
  const std::string& name = options.model.name;
  if (name == "sentiment") {
    t.epochs = 20;
    t.batch_size = 25;
    t.optimizer.kind = train::OptimizerKind::kAdagrad;
    t.optimizer.weight_decay = 1e-4;
    t.schedule.learning_rate = 0.05;
    t.optimizer.learning_rate_scales = {{"embedding/", 0.1}};
    t.best_metric = "root_fine";
  } else if (name == "molecules") {
    const bool esol = options.model.task == "esol";
    t.epochs = esol ? 80 : 20;
    t.batch_size = 32;
    t.optimizer.kind = train::OptimizerKind::kAdam;
    t.schedule.learning_rate = 0.001;
    t.schedule.kind = train::ScheduleKind::kCosine;  // to 0 over the run; spikes without it
    t.clip_norm = 1;
    t.best_metric = esol ? "rmse" : "roc_auc";
    t.best_mode = esol ? train::BestMode::kMin : train::BestMode::kMax;
  } else if (name == "attention") {
    t.epochs = 15;
    t.batch_size = 25;
    t.optimizer.kind = train::OptimizerKind::kAdam;
    t.schedule.learning_rate = 0.002;
    t.optimizer.weight_decay = 0;
    t.best_metric = "root_fine";
  } else if (name == "langid") {
    t.epochs = 8;
    t.batch_size = 32;
    t.optimizer.kind = train::OptimizerKind::kAdam;
    t.schedule.learning_rate = 0.005;
    t.best_metric = "accuracy";
  } else {
    t.epochs = 8;
    t.batch_size = 64;
    t.optimizer.kind = train::OptimizerKind::kAdam;
    t.schedule.learning_rate = 0.003;
    t.best_metric = "accuracy";
  }
  if (options.epochs > 0) t.epochs = options.epochs;
  if (options.batch_size > 0) t.batch_size = std::size_t(options.batch_size);
  if (!options.optimizer.empty()) t.optimizer.kind = train::parse_optimizer_kind(options.optimizer);
  if (options.learning_rate > 0) t.schedule.learning_rate = options.learning_rate;
  if (options.weight_decay >= 0) t.optimizer.weight_decay = options.weight_decay;
  t.optimizer.weight_decay_mode = train::parse_weight_decay_mode(options.weight_decay_mode);
  t.optimizer.momentum = options.momentum;
  if (!options.schedule.empty()) t.schedule.kind = train::parse_schedule_kind(options.schedule);
  t.schedule.warmup_steps = options.warmup_steps;
  if (options.clip_norm >= 0) t.clip_norm = options.clip_norm;
  if (options.embedding_learning_rate_scale >= 0) {
    t.optimizer.learning_rate_scales = {{"embedding/", options.embedding_learning_rate_scale}};
  }
  t.seed = options.model.seed;
  t.checkpoint_path = options.checkpoint;
  t.best_checkpoint_path = options.best_checkpoint;
  t.resume_from = options.resume;
  t.log_path = options.log;
  t.threads = options.threads;
  if (options.progress == "auto") {
    t.progress = train::ProgressMode::kAuto;
  } else if (options.progress == "bar") {
    t.progress = train::ProgressMode::kBar;
  } else if (options.progress == "lines") {
    t.progress = train::ProgressMode::kLines;
  } else if (options.progress == "off") {
    t.progress = train::ProgressMode::kOff;
  } else {
    fail("weft train", "--progress must be auto, bar, lines or off, got '", options.progress, "'");
  }
  if (t.schedule.kind == train::ScheduleKind::kCosine) {
    t.schedule.total_steps = 1;  // replaced by the run's length in run_train
  }
  t.validate();
  return t;
}

ModelOptions with_checkpoint_config(ModelOptions options, const std::string& checkpoint) {
  options.for_training = false;
  const train::Checkpoint info = train::read_checkpoint_info(checkpoint);
  if (!info.info.model_name.empty() && info.info.model_name != options.name) {
    fail("weft", "checkpoint '", checkpoint, "' holds a '", info.info.model_name, "' model, not '",
         options.name, "'");
  }
  // The trainer stores {"model": <the model's config_json>, "trainer": {...}}.
  const nlohmann::json config = nlohmann::json::parse(info.info.config_json, nullptr, false);
  const nlohmann::json model =
      config.is_object() ? config.value("model", nlohmann::json()) : nullptr;
  if (options.hidden == 0 && model.is_object() && model.contains("hidden")) {
    options.hidden = model["hidden"].get<std::int64_t>();
  }
  return options;
}

}  // namespace weft::tool
