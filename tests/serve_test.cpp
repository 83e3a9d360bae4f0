// The inference server on an ephemeral loopback port: predictions equal `weft infer`'s (the
// model loaded from the same checkpoint, predicting the same lines) for every built-in model
// under concurrent clients whose requests share batches; every error case by status and
// message; one bad instance among good ones; overload and recovery; reload under traffic;
// draining on stop.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io_test_util.h"
#include "serve_test_util.h"
#include "weft/core/error.h"
#include "weft/io/molecule_graph.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/serve/client.h"
#include "weft/serve/server.h"
#include "weft/tensor/allocator.h"
#include "weft/train/trainer.h"

namespace {

using namespace weft;
using namespace weft::models;
using nlohmann::json;
using weft::testing::RawConnection;

std::optional<OptionValues> small_options(const std::string& name, int seed = 3) {
  const std::filesystem::path data = weft::testing::io_data_dir();
  OptionValues o = find_model(name).default_options();
  o.update({{"data_dir", data.string()}, {"max_train", 24}, {"max_eval", 8}, {"seed", seed}},
           "test");
  if (name == "calculator") {
    o.set("hidden", 8, "test");
  } else if (name == "sentiment" || name == "attention") {
    if (!std::filesystem::exists(data / "sst/dev.txt")) return std::nullopt;
    o.update({{"hidden", 8}, {"no_embeddings", true}, {"embedding_dim", 6}}, "test");
  } else if (name == "langid") {
    if (!std::filesystem::exists(data / "tatoeba-langid/testset.csv")) return std::nullopt;
    o.update({{"hidden", 8}, {"char_hidden", 8}, {"char_embedding", 4}}, "test");
  } else if (name == "molecules") {
    if (!io::smiles_parser_available() ||
        !std::filesystem::exists(data / "molecules/delaney-processed.csv")) {
      return std::nullopt;
    }
    o.update({{"hidden", 8}, {"pair_hidden", 4}, {"graph_hidden", 8}, {"task", "esol"}}, "test");
  }
  return o;
}

// Lines `weft infer <name>` reads; instances are sent as these strings or as their JSON.
std::vector<std::string> infer_lines(const std::string& name) {
  if (name == "calculator") {
    return {
        R"({"op": "*", "left": {"number": 3}, "right": {"number": 4}})",
        R"({"op": "-", "left": {"number": 2}, "right": {"number": 7}})",
        R"({"op": "+", "left": {"op": "*", "left": {"number": 1}, "right": {"number": 5}}, "right": {"number": 9}})",
        R"({"number": 0})"};
  }
  if (name == "sentiment" || name == "attention") {
    return {"(3 (2 a) (4 (3 lovely) (2 film)))", "(1 (2 not) (1 good))",
            "(2 (2 (2 the) (2 plot)) (1 (2 is) (1 (1 dull) (2 .))))"};
  }
  if (name == "langid") return {"Bonjour tout le monde", "1\teng\tGood morning", "Hola amigo"};
  return {"CCO", R"({"smiles": "c1ccccc1O"})", "c1ccccc1"};
}

// Equal up to float32 rounding: a batch's GEMM shapes depend on which instances share it, so the
// last bit of a float may differ from `weft infer`'s batch (labels and strings must be exact).
bool same_prediction(const json& a, const json& b) {
  if (a.is_number_float() || b.is_number_float()) {
    if (!a.is_number() || !b.is_number()) return false;
    const double x = a.get<double>(), y = b.get<double>();
    return std::abs(x - y) <= 1e-5 * std::max(1.0, std::abs(y));
  }
  if (a.type() != b.type() || a.size() != b.size()) return false;
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key()) || !same_prediction(it.value(), b.at(it.key()))) return false;
    }
    return true;
  }
  if (a.is_array()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!same_prediction(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

// How many times `what` occurs in `text`.
std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

class Serving : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("weft_serve_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    stop();
    std::filesystem::remove_all(dir_);
  }

  // Trains a tiny model for one epoch and saves it; nullopt when its data is absent.
  std::optional<std::string> checkpoint(const std::string& name, int seed = 3) {
    const std::optional<OptionValues> options = small_options(name, seed);
    if (!options) return std::nullopt;
    std::unique_ptr<Model> model = create_model(*options);
    train::TrainerOptions recipe = find_model(name).training_options(*options);
    recipe.set("epochs", 1);
    recipe.set("batch_size", 8);
    recipe.set("progress", "off");
    train::Trainer(recipe).fit(*model);
    const std::string path = (dir_ / (name + std::to_string(seed) + ".safetensors")).string();
    save_model(path, *model);
    return path;
  }

  // What `weft infer <name> --checkpoint path` prints for these lines, as JSON values.
  static std::vector<json> infer(const std::string& name, const std::string& path,
                                 const std::vector<std::string>& lines) {
    std::unique_ptr<Model> model = load_model(path, ModelUse::kInfer, json::object(), name);
    std::vector<json> examples;
    for (const std::string& line : lines) examples.push_back(model->parse_example(line, "t:1"));
    std::vector<json> out;
    for (const json& p : model->predict(examples)) out.push_back(json::parse(p.dump()));
    return out;
  }

  void start(serve::ServerOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.http_threads = 64;  // more than the clients of any test here
    server_ = std::make_unique<serve::Server>(std::move(options));
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
  }
  void stop() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }

  serve::HttpResult post(const std::string& path, const std::string& body) {
    return serve::HttpClient("127.0.0.1", port_).post(path, body);
  }
  static std::string predict_path(const std::string& model) {
    return "/v1/models/" + model + ":predict";
  }

  std::filesystem::path dir_;
  std::unique_ptr<serve::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST(ServeLimits, NestingDepthIsMeasuredWithoutRecursion) {
  EXPECT_EQ(serve::json_nesting_depth(R"({"a": [1, {"b": "[[[["}]})", 100), 3);
  EXPECT_EQ(serve::json_nesting_depth(std::string(1000000, '['), 512), 513);
  EXPECT_EQ(serve::bracket_depth("(3 (2 a) (4 (3 b) (2 c)))", 100), 3);
}

TEST_F(Serving, PredictionsEqualInferForEveryModelUnderConcurrentClients) {
  serve::ServerOptions options;
  options.max_wait_ms = 20;  // generous, so that requests surely share batches here
  std::vector<std::string> names;
  std::map<std::string, std::vector<json>> expected;
  for (const char* name : {"calculator", "sentiment", "attention", "langid", "molecules"}) {
    const std::optional<std::string> path = checkpoint(name);
    if (!path) continue;  // its data is absent here
    options.models.push_back({name, *path});
    expected[name] = infer(name, *path, infer_lines(name));
    names.push_back(name);
  }
  start(options);
  constexpr int kClients = 24, kRequests = 6;
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      serve::HttpClient client("127.0.0.1", port_);
      for (int r = 0; r < kRequests; ++r) {
        const std::string& name = names[std::size_t(c + r) % names.size()];
        const std::vector<std::string> lines = infer_lines(name);
        // Instances as text lines, or as JSON values when the line is JSON.
        json instances = json::array();
        for (std::size_t i = 0; i < lines.size(); ++i) {
          const std::string& line = lines[(i + std::size_t(c)) % lines.size()];
          const json value = json::parse(line, nullptr, false);
          instances.push_back((c % 2 == 0 && !value.is_discarded()) ? value : json(line));
        }
        const serve::HttpResult res =
            client.post(predict_path(name), json{{"instances", instances}}.dump());
        if (res.status != 200) {
          ++failures;
          ADD_FAILURE() << name << ": " << res.status << " " << res.body << res.error;
          continue;
        }
        const json predictions = json::parse(res.body).at("predictions");
        for (std::size_t i = 0; i < lines.size(); ++i) {
          if (!same_prediction(predictions.at(i),
                               expected[name][(i + std::size_t(c)) % lines.size()])) {
            if (mismatches++ < 3) {
              ADD_FAILURE() << name << ": " << predictions.at(i).dump() << " vs "
                            << expected[name][(i + std::size_t(c)) % lines.size()].dump();
            }
          }
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(mismatches, 0);
  std::uint64_t shared = 0;
  for (const std::string& name : names) shared += server_->stats(name).shared_batches;
  EXPECT_GT(shared, 0u) << "no batch held instances of two requests";
  const std::string metrics = server_->metrics_text();
  EXPECT_NE(metrics.find("weft_requests_total{model=\"calculator\",code=\"200\"}"),
            std::string::npos);
  EXPECT_NE(metrics.find("# TYPE weft_batch_size histogram"), std::string::npos);
  EXPECT_NE(metrics.find("weft_queue_depth{model=\"calculator\"} 0"), std::string::npos);
}

TEST_F(Serving, EveryErrorHasItsStatusAndNamesTheProblem) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  options.max_body_bytes = 4096;
  options.max_depth = 64;
  options.max_instances = 8;
  start(options);
  const std::string calc = predict_path("calculator");
  auto expect = [&](const serve::HttpResult& r, int status, const std::string& text) {
    EXPECT_EQ(r.status, status) << r.body << r.error;
    EXPECT_NE(r.body.find(text), std::string::npos) << r.body;
  };
  expect(post(predict_path("nope"), R"({"instances": [1]})"), 404, "unknown model 'nope'");
  expect(post("/v2/other", "{}"), 404, "no such endpoint");
  expect(post(calc, R"({"instances": [)"), 400, "malformed JSON");
  expect(post(calc, R"([1, 2])"), 400, R"({\"instances\": [...]})");
  expect(post(calc, R"({"instances": []})"), 400, "empty");
  expect(post(calc, R"({"instances": [1,2,3,4,5,6,7,8,9]})"), 400, "at most 8");
  expect(post(calc, std::string(5000, ' ')), 413, "larger than 4096 bytes");
  expect(post(calc, std::string(2000, '[') + std::string(2000, ']')), 400, "deeper than 64");
  expect(post(calc, R"({"instances": [")" + std::string(100, '(') + R"("]})"), 400,
         "deeper than 64");
  expect(post(calc, "{\"instances\": [\"\\ud800\"]}"), 400, "");
  const serve::HttpResult health = serve::HttpClient("127.0.0.1", port_).get("/healthz");
  expect(health, 200, "ok");
  const serve::HttpResult list = serve::HttpClient("127.0.0.1", port_).get("/v1/models");
  expect(list, 200, "\"calculator\"");
  EXPECT_NO_THROW((void)json::parse(list.body).at("models").at(0).at("options"));
  // The server still answers after all that.
  expect(post(calc, R"({"instances": [{"number": 3}]})"), 200, "predictions");
  EXPECT_THROW(serve::HttpClient("10.0.0.1", port_), weft::Error);
}

TEST_F(Serving, OneBadInstanceFailsAloneAndTheOthersArePredicted) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  options.max_wait_ms = 20;
  start(options);
  const std::vector<json> expected = infer("calculator", path, infer_lines("calculator"));
  const std::vector<std::string> lines = infer_lines("calculator");
  json instances = json::array(
      {json::parse(lines[0]), "{not json", json::parse(lines[1]), json{{"op", "?"}}, lines[2]});
  // Concurrent good requests share the batches of the bad one.
  std::vector<std::thread> others;
  std::atomic<int> bad_neighbours{0};
  for (int c = 0; c < 8; ++c) {
    others.emplace_back([&] {
      serve::HttpClient client("127.0.0.1", port_);
      for (int r = 0; r < 5; ++r) {
        const serve::HttpResult res = client.post(
            predict_path("calculator"), json{{"instances", {json::parse(lines[3])}}}.dump());
        if (res.status != 200 || json::parse(res.body)["predictions"][0] != expected[3]) {
          ++bad_neighbours;
        }
      }
    });
  }
  const serve::HttpResult r =
      post(predict_path("calculator"), json{{"instances", instances}}.dump());
  for (std::thread& t : others) t.join();
  EXPECT_EQ(bad_neighbours, 0);
  ASSERT_EQ(r.status, 400) << r.body;
  const json body = json::parse(r.body);
  EXPECT_NE(body["error"].get<std::string>().find("instance 1"), std::string::npos) << r.body;
  ASSERT_EQ(body["errors"].size(), 2u) << r.body;
  EXPECT_EQ(body["errors"][0]["index"], 1);
  EXPECT_EQ(body["errors"][1]["index"], 3);
  EXPECT_NE(body["errors"][1]["error"].get<std::string>().find("instance 3"), std::string::npos);
  const json& predictions = body["predictions"];
  ASSERT_EQ(predictions.size(), 5u);
  EXPECT_EQ(predictions[0], expected[0]);
  EXPECT_EQ(predictions[2], expected[1]);
  EXPECT_EQ(predictions[4], expected[2]);
  EXPECT_TRUE(predictions[1].contains("error"));
}

TEST_F(Serving, AFullQueueAnswers503WithRetryAfterAndRecovers) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  options.max_queue = 4;
  options.max_batch = 1;
  start(options);
  const std::string one = R"({"number": 5})";
  // (More instances than the queue holds are a 400: serve_doors_test.cpp.) Many clients at once
  // against a queue of 4: some are refused, none is lost or wrong.
  std::atomic<int> ok{0}, refused{0}, other{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&] {
      serve::HttpClient client("127.0.0.1", port_);
      for (int r = 0; r < 4; ++r) {
        const serve::HttpResult res =
            client.post(predict_path("calculator"), json{{"instances", {one, one}}}.dump());
        (res.status == 200 ? ok : res.status == 503 && res.retry_after == "1" ? refused : other)++;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(other, 0);
  EXPECT_EQ(ok + refused, 128);
  EXPECT_GT(ok, 0);
  // Recovered: the queue drained.
  EXPECT_EQ(post(predict_path("calculator"), json{{"instances", {one}}}.dump()).status, 200);
}

TEST_F(Serving, ReloadUnderTrafficLosesNoRequestAndABadCheckpointKeepsTheOld) {
  const std::string first = *checkpoint("calculator", 3);
  const std::string second = *checkpoint("calculator", 11);
  const std::vector<std::string> lines = infer_lines("calculator");
  const std::vector<json> a = infer("calculator", first, lines);
  const std::vector<json> b = infer("calculator", second, lines);
  serve::ServerOptions options;
  options.models = {{"calculator", first}};
  start(options);
  json instances = json::array();
  for (const std::string& line : lines) instances.push_back(line);
  const std::string body = json{{"instances", instances}}.dump();
  std::atomic<bool> done{false};
  std::atomic<int> answered{0}, wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      serve::HttpClient client("127.0.0.1", port_);
      while (!done) {
        const serve::HttpResult res = client.post(predict_path("calculator"), body);
        const json p = res.status == 200 ? json::parse(res.body)["predictions"] : json();
        // All of one model's predictions: a request never mixes two checkpoints.
        if (p != json(a) && p != json(b)) ++wrong;
        ++answered;
      }
    });
  }
  for (int k = 0; k < 6; ++k) {
    const std::string to = k % 2 == 0 ? second : first;
    const serve::HttpResult r =
        post("/v1/models/calculator:reload", json{{"checkpoint", to}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const serve::HttpResult bad =
      post("/v1/models/calculator:reload",
           json{{"checkpoint", (dir_ / "missing.safetensors").string()}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("the old checkpoint keeps serving"), std::string::npos) << bad.body;
  EXPECT_NE(bad.body.find("missing.safetensors"), std::string::npos) << bad.body;
  done = true;
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(answered, 0);
  EXPECT_EQ(server_->stats("calculator").reloads, 6u);
  // After six swaps the first checkpoint serves again.
  const serve::HttpResult r = post(predict_path("calculator"), body);
  EXPECT_EQ(json::parse(r.body)["predictions"], json(a));
}

TEST_F(Serving, StopDrainsTheRequestsInFlight) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  options.max_batch = 1;
  start(options);
  std::atomic<int> ok{0}, other{0};
  std::atomic<int> sent{0};
  std::vector<std::thread> clients;
  json instances = json::array();
  for (int i = 0; i < 200; ++i) instances.push_back(json{{"number", i % 7}});
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      serve::HttpClient client("127.0.0.1", port_);
      ++sent;
      const serve::HttpResult r =
          client.post(predict_path("calculator"), json{{"instances", instances}}.dump());
      (r.status == 200 ? ok : other)++;
    });
  }
  while (sent < 8) std::this_thread::yield();
  // Stop once some request is being worked on (its instances are running), not before.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (server_->stats("calculator").examples == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop();  // returns once every request in flight is answered
  for (std::thread& t : clients) t.join();
  // A request the server accepted is answered; one that arrived after the stop may be refused.
  EXPECT_EQ(ok + other, 8);
  EXPECT_GT(ok, 0);
}

// Issue 29, item 9: a chunked body is held to --max-body-bytes as it arrives (413 before the
// rest is sent); a chunked body within the limit is decoded and predicted.
TEST_F(Serving, AChunkedBodyIsBoundedAsItArrives) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  options.max_body_bytes = 4096;
  start(options);
  RawConnection big(port_);
  big.send(
      "POST /v1/models/calculator:predict HTTP/1.1\r\nHost: t\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  const std::string chunk = "400\r\n" + std::string(1024, ' ') + "\r\n";
  for (int i = 0; i < 200 && !big.closed(); ++i) big.send(chunk);  // 200 KiB, never a last chunk
  const std::string refused = big.read_until_closed();
  EXPECT_NE(refused.find("HTTP/1.1 413"), std::string::npos) << refused.substr(0, 300);
  EXPECT_NE(refused.find("larger than 4096 bytes"), std::string::npos) << refused.substr(0, 300);
  EXPECT_TRUE(big.closed());
  // Within the limit, split in three chunks (one with an extension) and a trailer.
  const std::string body = R"({"instances": [{"number": 3}]})";
  RawConnection small(port_);
  small.send(fmt::format(
      "POST /v1/models/calculator:predict HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
      "Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n{:x};ext=1\r\n{}\r\n0\r\nX-T: 1\r\n\r\n",
      10, body.substr(0, 10), body.size() - 10, body.substr(10)));
  const std::string answer = small.read_until_closed();
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  EXPECT_NE(answer.find(infer("calculator", path, {R"({"number": 3})"})[0].dump()),
            std::string::npos)
      << answer;
}

// Item 10: connections dribbling header bytes, and idle ones, outnumbering the HTTP threads do
// not keep a normal client waiting; the dribblers get 408 once their header deadline passes,
// and connections past --max-connections are answered 503.
TEST_F(Serving, SlowAndIdleConnectionsHoldNoThreadAndAreDropped) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  options.header_timeout_s = 1;
  options.idle_timeout_s = 1;
  start(options);  // 64 HTTP threads
  std::vector<std::unique_ptr<RawConnection>> slow, idle;
  // Each slow connection sends its first byte at once: the idle deadline (from the accept)
  // must not close it before its header deadline can.
  for (int i = 0; i < 100; ++i) {
    slow.push_back(std::make_unique<RawConnection>(port_));
    slow.back()->send("P");
  }
  for (int i = 0; i < 100; ++i) idle.push_back(std::make_unique<RawConnection>(port_));
  std::atomic<bool> done{false};
  std::thread dribbler([&] {
    const std::string request = "POST /v1/models/calculator:predict HTTP/1.1\r\nHost: t\r\n";
    // slow[0] sends one byte only, so its 408 cannot be lost to a reset from later bytes.
    for (std::size_t k = 1; k < request.size() && !done; ++k) {
      for (std::size_t i = 1; i < slow.size(); ++i) slow[i]->send(request.substr(k, 1));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
  int answered = 0;
  serve::HttpClient client("127.0.0.1", port_, 10);
  for (int r = 0; r < 10; ++r) {
    answered +=
        client.post(predict_path("calculator"), R"({"instances": [{"number": 1}]})").status == 200;
  }
  done = true;
  dribbler.join();
  EXPECT_EQ(answered, 10);
  const std::string dropped = slow[0]->read_until_closed();
  EXPECT_NE(dropped.find("HTTP/1.1 408"), std::string::npos) << dropped;
  EXPECT_TRUE(slow[0]->closed());
  EXPECT_EQ(idle[0]->read_until_closed(), "");
  EXPECT_TRUE(idle[0]->closed());
  stop();
  options.max_connections = 3;
  start(options);
  RawConnection a(port_), b(port_), c(port_), d(port_);
  const std::string refused = d.read_until_closed();
  EXPECT_NE(refused.find("HTTP/1.1 503"), std::string::npos) << refused;
}

// Item 11: a second server on a port in use fails to bind, naming the address.
TEST_F(Serving, ASecondServerOnAPortInUseFailsNamingIt) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  start(options);
  serve::ServerOptions second = options;
  second.host = "127.0.0.1";
  second.port = port_;
  serve::Server other(second);
  try {
    other.bind();
    ADD_FAILURE() << "the second server bound port " << port_;
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port_)), std::string::npos)
        << e.what();
  }
}

// After --release-memory-idle-s with nothing queued, the worker hands the tensor pool's cache
// back: no cached byte is left, /metrics counts the spell, and the next request is answered as
// before (and, idle again, releases again).
TEST_F(Serving, AnIdleServerHandsThePoolsCacheBack) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  options.release_memory_idle_s = 0.3;
  start(options);
  const std::vector<std::string> lines = infer_lines("calculator");
  const std::vector<json> expected = infer("calculator", path, lines);
  const auto releases = [&] {
    const std::string m = server_->metrics_text();
    const std::string name = "weft_memory_releases_total{model=\"calculator\"} ";
    const std::size_t at = m.find(name);
    return at == std::string::npos ? -1.0 : std::stod(m.substr(at + name.size()));
  };
  for (int spell = 1; spell <= 2; ++spell) {
    const serve::HttpResult res =
        post(predict_path("calculator"), json{{"instances", lines}}.dump());
    ASSERT_EQ(res.status, 200) << res.body;
    const json predictions = json::parse(res.body).at("predictions");
    for (std::size_t i = 0; i < lines.size(); ++i)
      EXPECT_TRUE(same_prediction(predictions[i], expected[i])) << predictions[i];
    EXPECT_GT(allocator_stats().bytes_cached, 0);  // the checkpoint's training and the batch
    for (int i = 0; i < 10000 && releases() < spell; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(releases(), spell);
    EXPECT_EQ(allocator_stats().bytes_cached, 0);
    EXPECT_NE(server_->metrics_text().find("weft_memory_bytes{kind=\"cached\"} 0\n"),
              std::string::npos);
  }
}

// Item 12: invalid UTF-8 is a 400 naming the instance and the byte offset, counted.
TEST_F(Serving, InvalidUtf8IsA400NamingTheInstanceAndTheByteAndIsCounted) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  start(options);
  const std::string body = "{\"instances\": [{\"number\": 1}, \"(1 caf\xC3\xA9 \xFF)\"]}";
  const serve::HttpResult r = post(predict_path("calculator"), body);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("instance 1: invalid UTF-8 at byte " + std::to_string(body.find('\xFF'))),
            std::string::npos)
      << r.body;
  EXPECT_NE(
      server_->metrics_text().find("weft_requests_total{model=\"calculator\",code=\"400\"} 1"),
      std::string::npos);
}

// Item 13: :reload reads only from the checkpoint's directory and --allow-reload-from, and
// never quotes a file it could not load.
TEST_F(Serving, ReloadIsConfinedAndItsErrorsQuoteNoFile) {
  const std::string path = *checkpoint("calculator");
  const std::filesystem::path elsewhere =
      std::filesystem::temp_directory_path() /
      ("weft_serve_test_elsewhere_" + std::to_string(::getpid()));
  std::filesystem::create_directories(elsewhere / "sub");
  std::filesystem::copy_file(path, elsewhere / "sub" / "c.safetensors");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  start(options);
  const std::string reload = "/v1/models/calculator:reload";
  auto reload_from = [&](const std::filesystem::path& p) {
    return post(reload, json{{"checkpoint", p.string()}}.dump());
  };
  const serve::HttpResult outside = reload_from("/etc/passwd");
  EXPECT_EQ(outside.status, 403) << outside.body;
  EXPECT_NE(outside.body.find("refused"), std::string::npos) << outside.body;
  EXPECT_EQ(outside.body.find("bytes"), std::string::npos) << outside.body;
  EXPECT_EQ(reload_from(elsewhere / "sub" / "c.safetensors").status, 403);
  // Out through a link or "..": the resolved path counts.
  std::filesystem::create_symlink("/etc/passwd", dir_ / "link.safetensors");
  EXPECT_EQ(reload_from(dir_ / "link.safetensors").status, 403);
  EXPECT_EQ(reload_from(dir_ / ".." / "x.safetensors").status, 403);
  // Inside, a file that is no checkpoint: its first bytes read as a header length are not told.
  { std::ofstream(dir_ / "junk.safetensors") << "ABCDEFGHIJKLMNOP and more bytes"; }
  const serve::HttpResult junk = reload_from(dir_ / "junk.safetensors");
  EXPECT_EQ(junk.status, 400) << junk.body;
  EXPECT_EQ(json::parse(junk.body).at("error"),
            "reload failed, the old checkpoint keeps serving: '" +
                (dir_ / "junk.safetensors").string() +
                "' is not a checkpoint of this model (the server's log says why)");
  EXPECT_EQ(post(reload, "").status, 200);  // no body: the same checkpoint again
  stop();
  options.allow_reload_from = {(elsewhere / "sub").string()};
  start(options);
  const serve::HttpResult allowed = reload_from(elsewhere / "sub" / "c.safetensors");
  EXPECT_EQ(allowed.status, 200) << allowed.body;
  EXPECT_EQ(server_->stats("calculator").reloads, 1u);
  std::filesystem::remove_all(elsewhere);
}

// Item 14: HTTP framing answered at once and exactly.
TEST_F(Serving, FramingIsAnsweredAtOnceAndExactly) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  options.max_body_bytes = 4096;
  start(options);
  // The connection stays open (no EOF): an answer proves the server did not wait for a body.
  auto exchange = [&](const std::string& request) {
    RawConnection c(port_);
    c.send(request);
    return c.read_until_closed();
  };
  const std::string calc = "/v1/models/calculator";
  std::string r =
      exchange("POST " + calc + ":reload HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
  r = exchange("POST " + calc + ":predict HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 400"), std::string::npos) << r;
  EXPECT_NE(r.find("the body is empty"), std::string::npos) << r;
  for (const std::string length : {"-1", "12345678901234567890", "1e3", "5, 6"}) {
    r = exchange("POST " + calc + ":predict HTTP/1.1\r\nHost: t\r\nContent-Length: " + length +
                 "\r\n\r\n");
    EXPECT_NE(r.find("HTTP/1.1 400"), std::string::npos) << length << ": " << r;
    EXPECT_NE(r.find("Content-Length"), std::string::npos) << r;
  }
  // Two requests in one write: both answered, in order.
  const std::string body = R"({"instances": [{"number": 2}]})";
  const std::string one =
      fmt::format("POST {}:predict HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{}", calc,
                  body.size(), body);
  r = exchange(one + "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(occurrences(r, "HTTP/1.1 200"), 2u) << r;
  EXPECT_LT(r.find("predictions"), r.find("\"ok\"")) << r;
  // The fuzz target's entry point answers the same bytes the same way, without a socket.
  EXPECT_EQ(occurrences(server_->answer_raw(one + "GET /healthz HTTP/1.1\r\n\r\n"), "HTTP/1.1 200"),
            2u);
  r = exchange("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 414"), std::string::npos) << r.substr(0, 200);
  EXPECT_NE(r.find("longer than"), std::string::npos) << r.substr(0, 200);
  for (const std::string method : {"PUT", "DELETE", "GET"}) {
    r = exchange(method + " " + calc + ":predict HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    EXPECT_NE(r.find("HTTP/1.1 405"), std::string::npos) << method << ": " << r;
    EXPECT_NE(r.find("Allow: POST"), std::string::npos) << r;
  }
  r = exchange("DELETE /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_NE(r.find("Allow: GET, HEAD"), std::string::npos) << r;
  r = exchange("POST " + calc +
               ":predict HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
               "Content-Length: 10000000\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 413"), std::string::npos) << r;
  EXPECT_EQ(r.find("100 Continue"), std::string::npos) << r;
  // Within the limit, "100 Continue" comes before the body is sent, then the answer.
  RawConnection waiting(port_);
  waiting.send(
      fmt::format("POST {}:predict HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                  "Connection: close\r\nContent-Length: {}\r\n\r\n",
                  calc, body.size()));
  EXPECT_EQ(waiting.read_some(), "HTTP/1.1 100 Continue\r\n\r\n");
  waiting.send(body);
  r = waiting.read_until_closed();
  EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
  EXPECT_EQ(r.find("100 Continue"), std::string::npos) << r;  // once only
  // A bad instance's message names it once.
  const serve::HttpResult bad = post(predict_path("calculator"), R"({"instances": [{"op": "?"}]})");
  EXPECT_EQ(bad.status, 400);
  // Named once in each of "error", "errors" and "predictions", the model's prefix once too.
  EXPECT_EQ(occurrences(bad.body, "instance 0"), 3u) << bad.body;
  EXPECT_EQ(occurrences(bad.body, "[calculator]"), 3u) << bad.body;
}

// Item 15: with a token, every request but /healthz needs it.
TEST_F(Serving, ABearerTokenGuardsEverythingButHealthz) {
  const std::string path = *checkpoint("calculator");
  serve::ServerOptions options;
  options.models = {{"calculator", path}};
  options.auth_token = "0123456789abcdef-secret";
  start(options);
  auto request = [&](const std::string& target, const std::string& authorization) {
    RawConnection c(port_);
    c.send("GET " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + authorization +
           "\r\n");
    return c.read_until_closed();
  };
  std::string r = request("/v1/models", "");
  EXPECT_NE(r.find("HTTP/1.1 401"), std::string::npos) << r;
  EXPECT_NE(r.find("WWW-Authenticate: Bearer"), std::string::npos) << r;
  r = request("/metrics", "Authorization: Bearer 0123456789abcdef-secreT\r\n");
  EXPECT_NE(r.find("HTTP/1.1 401"), std::string::npos) << r;
  r = request("/v1/models", "Authorization: Bearer 0123456789abcdef-secret\r\n");
  EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
  r = request("/healthz", "");
  EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
  EXPECT_EQ(post(predict_path("calculator"), R"({"instances": [{"number": 1}]})").status, 401);
  EXPECT_TRUE(serve::is_loopback_host("127.0.0.1"));
  EXPECT_FALSE(serve::is_loopback_host("0.0.0.0"));
}

}  // namespace
