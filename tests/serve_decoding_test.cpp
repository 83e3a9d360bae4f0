// Iteration-level decoding in the server (src/serve/decoding_loop.h), on the countdown model:
// answers equal `weft infer`'s (the checkpoint loaded and predicted, greedy and beam) under
// many clients joining mid-run; a short request overtakes a long one only at iteration level;
// a client that goes away is retired and every value it held is freed; the bounds by status and
// message; a program that throws fails its own instance only. Also Engine::cancel itself.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "float32_tolerance.h"
#include "serve_test_util.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/rng.h"
#include "weft/models/countdown.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/serve/client.h"
#include "weft/serve/server.h"
#include "weft/tensor/allocator.h"

namespace {

using namespace weft;
using namespace weft::models;
using nlohmann::json;
using weft::testing::float32_tolerance;
using weft::testing::RawConnection;

void register_test_models() { register_countdown_model(); }

double metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + "{", 0) == 0) return std::stod(line.substr(line.rfind(' ') + 1));
  ADD_FAILURE() << "no metric " << name;
  return -1;
}

// Resident memory now, in MB (Linux).
double rss_mb() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * double(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

class DecodingServe : public ::testing::Test {
 protected:
  void SetUp() override {
    register_test_models();
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("weft_decode_test_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string checkpoint(const std::string& name, int max_count) {
    OptionValues o = find_model(name).default_options();
    o.update({{"max_count", max_count}, {"seed", 5}}, "test");
    const std::string path = (dir_ / (name + ".safetensors")).string();
    save_model(path, *create_model(o));
    return path;
  }
  void start(serve::ServerOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.http_threads = 96;
    server_ = std::make_unique<serve::Server>(std::move(options));
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
  }
  // Serves a countdown checkpoint of `max_count` with `options`; its path.
  std::string serve_countdown(int max_count, serve::ServerOptions options = {}) {
    const std::string path = checkpoint("countdown", max_count);
    options.models.push_back({"countdown", path});
    start(options);
    return path;
  }
  // An untrained tree2seq or seq2tree, its weights spread so that outputs vary in length.
  std::string decoder_checkpoint(const std::string& name) {
    OptionValues o = find_model(name).default_options();
    o.update({{"hidden", 8}, {"max_depth", 2}, {"max_train", 6}, {"max_eval", 4}, {"seed", 11}},
             "test");
    std::unique_ptr<Model> model = create_model(o);
    Rng rng(5);
    for (Parameter p : model->parameters())
      for (float& v : std::span(p.value().data<float>(), std::size_t(p.value().numel())))
        v = rng.uniform(-0.8f, 0.8f);
    const std::string path = (dir_ / (name + ".safetensors")).string();
    save_model(path, *model);
    return path;
  }
  serve::HttpResult post(const json& body, const std::string& model = "countdown") {
    return serve::HttpClient("127.0.0.1", port_)
        .post("/v1/models/" + model + ":predict", body.dump());
  }
  double live() { return metric(server_->metrics_text(), "weft_decode_live_sequences"); }
  void wait_until(const std::function<bool()>& ready) {
    for (int i = 0; i < 20000 && !ready(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(ready());
  }

  std::filesystem::path dir_;
  std::unique_ptr<serve::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// What `weft infer countdown --checkpoint path --beam b --max-steps s` answers for `examples`.
std::vector<json> infer(const std::string& path, const std::vector<json>& examples, int beam,
                        int max_steps = 0, double length_penalty = 0.0) {
  std::unique_ptr<Model> model = load_model(
      path, ModelUse::kInfer,
      json{{"beam", beam}, {"max_steps", max_steps}, {"length_penalty", length_penalty}});
  std::vector<json> parsed;
  for (const json& e : examples) parsed.push_back(model->parse_example(e.dump(), "t:1"));
  return model->predict(parsed);
}

// The same tokens, and log-probabilities equal to float32 rounding: a request computed in
// another batch may round differently (tests/float32_tolerance.h), one rounding per token.
bool same_decoding(const json& a, const json& b) {
  if (a.at("tokens") != b.at("tokens") || a.at("ended") != b.at("ended")) return false;
  const double want = b.at("log_prob").get<double>();
  const int tokens = int(b.at("tokens").size()) + 1;
  if (std::abs(a.at("log_prob").get<double>() - want) > float32_tolerance(want, tokens))
    return false;
  return a.contains("beams") == b.contains("beams") &&
         (!a.contains("beams") || a["beams"].size() == b["beams"].size());
}

TEST_F(DecodingServe, AnswersEqualInferGreedyAndBeamUnderClientsJoiningMidRun) {
  const std::string path = serve_countdown(64);
  std::vector<json> examples;
  for (int i = 0; i < 24; ++i) examples.push_back({{"count", (i * 7) % 41}, {"word", 1 + i % 8}});
  const std::vector<json> greedy = infer(path, examples, 0), beam = infer(path, examples, 3);
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&, c] {
      serve::HttpClient client("127.0.0.1", port_);
      for (int r = 0; r < 4; ++r) {
        std::this_thread::sleep_for(std::chrono::microseconds(300 * ((c * 5 + r) % 11)));
        const std::size_t first = std::size_t(c * 3 + r) % examples.size();
        const int width = (c + r) % 2 == 0 ? 1 : 3;
        json body = {{"instances", {examples[first], examples[(first + 5) % examples.size()]}}};
        if (width > 1) body["beam"] = width;
        const serve::HttpResult res = client.post("/v1/models/countdown:predict", body.dump());
        if (res.status != 200) {
          if (failures++ < 3) ADD_FAILURE() << res.status << " " << res.body << res.error;
          continue;
        }
        const json got = json::parse(res.body).at("predictions");
        const std::vector<json>& want = width > 1 ? beam : greedy;
        for (std::size_t k = 0; k < 2; ++k) {
          const json& expected = want[(first + 5 * k) % examples.size()];
          if (!same_decoding(got.at(k), expected) && mismatches++ < 3)
            ADD_FAILURE() << got.at(k).dump() << " vs " << expected.dump();
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(mismatches, 0);
  const std::string m = server_->metrics_text();
  // Sequences shared steps: far fewer steps than tokens generated.
  EXPECT_LT(metric(m, "weft_decode_steps_total") * 2, metric(m, "weft_decode_tokens_total"));
  EXPECT_EQ(metric(m, "weft_decode_sequences_total"), 32 * 4 * 2);
  EXPECT_GT(metric(m, "weft_decode_time_to_first_step_seconds_count"), 0);
  EXPECT_GT(metric(m, "weft_decode_steps_per_second"), 0);  // over the last 10 seconds
  EXPECT_GE(metric(m, "weft_decode_tokens_per_second"), metric(m, "weft_decode_steps_per_second"));
  // Every generation is freed once the last sequence is answered.
  wait_until([&] { return metric(server_->metrics_text(), "weft_decode_tape_nodes") == 0; });
  EXPECT_EQ(metric(server_->metrics_text(), "weft_decode_generations"), 0);
}

// A short request sent while a long one decodes is answered before it at iteration level, and
// after it when whole batches are served.
TEST_F(DecodingServe, AShortRequestOvertakesALongOneOnlyAtIterationLevel) {
  const std::string path = checkpoint("countdown", 100000);
  for (const bool iteration_level : {true, false}) {
    serve::ServerOptions options;
    options.models.push_back({"countdown", path});
    options.iteration_level = iteration_level;
    start(options);
    auto long_one = std::async(std::launch::async, [&] {
      return post({{"instances", {{{"count", 20000}}}}});
    });
    wait_until([&] { return live() >= 1; });
    const serve::HttpResult short_one = post({{"instances", {{{"count", 2}}}}});
    ASSERT_EQ(short_one.status, 200) << short_one.body;
    const bool long_done = long_one.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    EXPECT_EQ(long_done, !iteration_level) << "iteration_level " << iteration_level;
    EXPECT_EQ(long_one.get().status, 200);
    server_->stop();
    thread_.join();
    server_.reset();
  }
}
// Sends a predict request on a raw connection and leaves the socket open (closing it is the
// client going away).
int send_and_hold(int port, const json& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(std::uint16_t(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return -1;
  const std::string text = body.dump();
  const std::string request = fmt::format(
      "POST /v1/models/countdown:predict HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: {}\r\n\r\n{}",
      text.size(), text);
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != ssize_t(request.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Rounds of clients that go away mid-decode: each is retired long before its output's end,
// the generations holding its values are freed (no tape node left), and resident memory after
// the later rounds stays at its level after the first.
TEST_F(DecodingServe, ClientsThatGoAwayAreRetiredAndTheirMemoryFreed) {
  const std::string path = checkpoint("countdown", 1000000);
  serve::ServerOptions options;
  options.models.push_back({"countdown", path});
  start(options);
  constexpr int kRounds = 6, kClients = 16, kCount = 400000;
  double level = 0;
  for (int round = 0; round < kRounds; ++round) {
    const double steps_before = metric(server_->metrics_text(), "weft_decode_steps_total");
    std::vector<int> fds;
    for (int c = 0; c < kClients; ++c) {
      fds.push_back(send_and_hold(
          port_, {{"instances", {{{"count", kCount - c}, {"word", 2}}}}, {"beam", 1 + c % 2}}));
      ASSERT_GE(fds.back(), 0);
    }
    wait_until([&] { return live() >= kClients * 1.5; });  // half of them are beams of 2
    for (int fd : fds) ::close(fd);
    wait_until([&] { return live() == 0; });
    const std::string m = server_->metrics_text();
    EXPECT_EQ(metric(m, "weft_decode_cancelled_total"), kClients * (round + 1));
    EXPECT_LT(metric(m, "weft_decode_steps_total") - steps_before, kCount / 10);
    EXPECT_EQ(metric(m, "weft_decode_generations"), 0);
    EXPECT_EQ(metric(m, "weft_decode_tape_nodes"), 0);
    if (round == 0) level = rss_mb();
  }
  EXPECT_LT(rss_mb() - level, 40.0) << "resident memory grew over the rounds of cancelled clients";
  // The server still answers.
  const serve::HttpResult after = post({{"instances", {{{"count", 3}}}}});
  EXPECT_EQ(after.status, 200) << after.body;
}

// A decoding server idle for release_memory_idle_s hands the pool's cache back too (its wait
// for requests is the decoding loop's, not the batching driver's), and decodes as before after.
TEST_F(DecodingServe, AnIdleDecodingServerHandsThePoolsCacheBack) {
  serve::ServerOptions options;
  options.release_memory_idle_s = 0.3;
  const std::string path = serve_countdown(1000, options);
  const std::vector<json> examples{{{"count", 40}, {"word", 2}}, {{"count", 7}}};
  const std::vector<json> expected = infer(path, examples, 0);
  for (int spell = 1; spell <= 2; ++spell) {
    const serve::HttpResult res = post({{"instances", examples}});
    ASSERT_EQ(res.status, 200) << res.body;
    const json answers = json::parse(res.body).at("predictions");
    for (std::size_t i = 0; i < examples.size(); ++i)
      EXPECT_TRUE(same_decoding(answers[i], expected[i])) << answers[i];
    wait_until(
        [&] { return metric(server_->metrics_text(), "weft_memory_releases_total") >= spell; });
    EXPECT_EQ(metric(server_->metrics_text(), "weft_memory_releases_total"), spell);
    EXPECT_EQ(allocator_stats().bytes_cached, 0);
  }
}

TEST_F(DecodingServe, BoundsAnswerByStatusAndMessage) {
  const std::string path = checkpoint("countdown", 100000);
  serve::ServerOptions options;
  options.models.push_back({"countdown", path});
  options.max_beam = 4;
  options.max_decode_steps = 50;
  options.max_queue = 2;
  options.max_live_sequences = 4;
  start(options);
  const auto expect_400 = [&](const json& body, const std::string& says) {
    const serve::HttpResult r = post(body);
    EXPECT_EQ(r.status, 400) << body.dump();
    EXPECT_NE(r.body.find(says), std::string::npos) << r.body << " lacks " << says;
  };
  const json one = {{"count", 5}};
  expect_400({{"instances", {one}}, {"beam", 5}},
             R"(\"beam\": 5 is more than this server allows (4; --max-beam))");
  expect_400({{"instances", {one}}, {"max_steps", 51}},
             R"(\"max_steps\": 51 is more than this server allows (50; --max-decode-steps))");
  const std::string beam_says =
      R"(\"beam\" must be 0 (greedy) or a positive integer (a beam search's width), got )";
  expect_400({{"instances", {one}}, {"beam", "wide"}}, beam_says + R"(\"wide\")");
  expect_400({{"instances", {one}}, {"beam", -1}}, beam_says + "-1");
  expect_400({{"instances", {one}}, {"max_steps", 0}}, "must be a positive integer, got 0");
  expect_400({{"instances", {one}}, {"length_penalty", -0.5}},
             R"(\"length_penalty\" must be a number in [0, 4], got -0.5)");
  expect_400({{"instances", {one}}, {"length_penalty", 4.5}}, "in [0, 4], got 4.5");
  expect_400({{"instances", {one}}, {"length_penalty", "long"}}, R"(got \"long\")");
  expect_400({{"instances", {{{"count", 100001}}}}}, "count must be an integer in [0, 100000]");
  // A program that reaches its step bound answers with what it has, and says so.
  const serve::HttpResult bounded = post({{"instances", {{{"count", 9}}}}, {"max_steps", 4}});
  ASSERT_EQ(bounded.status, 200) << bounded.body;
  const json got = json::parse(bounded.body)["predictions"][0];
  EXPECT_TRUE(same_decoding(got, infer(path, {{{"count", 9}}}, 0, 4)[0]));
  EXPECT_EQ(got["tokens"].size(), 4u);
  EXPECT_EQ(got["ended"], false);
  EXPECT_EQ(got["stopped"], "the step bound of 4 was reached before the end token");
  // The default bound is the server's (50), below the model's (100001).
  const json capped = json::parse(post({{"instances", {{{"count", 70}}}}}).body)["predictions"][0];
  EXPECT_EQ(capped["tokens"].size(), 50u);
}

// One convention for "beam" (models/iterative_decoding.h): 0 is greedy decoding, k >= 1 beam
// search of width k, and width 1 finds greedy's answer (with "beams"). The server, with no
// "beam" (the model's default, 0), beam 0 and beam 1, answers as weft infer --beam 0 and 1.
TEST_F(DecodingServe, BeamZeroIsGreedyAndBeamOneFindsGreedysAnswer) {
  const std::string path = serve_countdown(64);
  std::vector<json> examples;
  for (int i = 0; i < 6; ++i) examples.push_back({{"count", 3 + 9 * i}, {"word", 1 + i}});
  const std::vector<json> greedy = infer(path, examples, 0), width_one = infer(path, examples, 1);
  const auto served = [&](std::optional<int> beam) {
    json body = {{"instances", examples}};
    if (beam) body["beam"] = *beam;
    const serve::HttpResult r = post(body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body).at("predictions");
  };
  const json by_default = served(std::nullopt), zero = served(0), one = served(1);
  for (std::size_t i = 0; i < examples.size(); ++i) {
    EXPECT_FALSE(greedy[i].contains("beams"));
    ASSERT_TRUE(width_one[i].contains("beams"));
    EXPECT_EQ(width_one[i]["beams"].size(), 1u);
    // Width 1 finds greedy's tokens and log-probability.
    EXPECT_EQ(width_one[i]["tokens"], greedy[i]["tokens"]);
    EXPECT_NEAR(width_one[i]["log_prob"].get<double>(), greedy[i]["log_prob"].get<double>(), 1e-6);
    EXPECT_EQ(greedy[i]["tokens"].size(), std::size_t(4 + 9 * i));  // count words, then the end
    EXPECT_TRUE(same_decoding(by_default[i], greedy[i])) << by_default[i].dump();
    EXPECT_TRUE(same_decoding(zero[i], greedy[i])) << zero[i].dump();
    EXPECT_TRUE(same_decoding(one[i], width_one[i])) << one[i].dump();
  }
  // A model whose own beam option is wider than the server allows: a request that does not
  // ask for a width is refused, naming both; one that asks within the bound is served.
  server_->stop();
  thread_.join();
  serve::ServerOptions options;
  options.models.push_back({"countdown", path});
  options.overrides = {{"beam", 6}};
  options.max_beam = 4;
  start(options);
  const serve::HttpResult refused = post({{"instances", {examples[0]}}});
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("the model's beam option (6) is more than this server allows (4; "
                              "--max-beam)"),
            std::string::npos)
      << refused.body;
  EXPECT_EQ(post({{"instances", {examples[0]}}, {"beam", 0}}).status, 200);
}

// A request's "length_penalty" reaches the countdown's beam search (as weft infer's option
// does): every kept hypothesis scores log_prob / length^penalty, best first, and the server
// answers as infer with the same penalty.
TEST_F(DecodingServe, ALengthPenaltyRanksTheCountdownsBeamsAsInferDoes) {
  const std::string path = serve_countdown(64);
  std::vector<json> examples;
  for (int i = 0; i < 4; ++i) examples.push_back({{"count", 2 + 5 * i}, {"word", 1 + i}});
  const double penalty = 1.0;
  const std::vector<json> want = infer(path, examples, 3, 0, penalty);
  const serve::HttpResult r =
      post({{"instances", examples}, {"beam", 3}, {"length_penalty", penalty}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json got = json::parse(r.body).at("predictions");
  int penalised = 0;  // hypotheses whose score differs from their plain log-probability
  for (std::size_t i = 0; i < examples.size(); ++i) {
    EXPECT_TRUE(same_decoding(got[i], want[i])) << got[i].dump() << " vs " << want[i].dump();
    double previous = std::numeric_limits<double>::infinity();
    for (const json& h : want[i].at("beams")) {
      const double log_prob = h.at("log_prob").get<double>(), score = h.at("score").get<double>();
      const double length = double(h.at("tokens").size());
      EXPECT_NEAR(score, log_prob / std::pow(length, penalty), 1e-9) << h.dump();
      EXPECT_LE(score, previous + 1e-12);
      previous = score;
      penalised += std::abs(score - log_prob) > 1e-6;
    }
  }
  EXPECT_GT(penalised, 0);  // the beams are not all certain, so the penalty shows
}

TEST_F(DecodingServe, LiveSequencesAreBoundedAndAFullQueueAnswers503) {
  serve::ServerOptions options;
  options.models.push_back({"countdown", checkpoint("countdown", 100000)});
  options.max_beam = 4;
  options.max_queue = 2;
  options.max_live_sequences = 4;
  start(options);
  // Four live beams fill the server; two more instances fill the queue; the next is refused.
  const json one = {{"count", 5}};
  const int holder = send_and_hold(port_, {{"instances", {{{"count", 99000}}}}, {"beam", 4}});
  wait_until([&] { return live() == 4; });
  const int queued = send_and_hold(port_, {{"instances", {one, one}}});
  wait_until([&] { return metric(server_->metrics_text(), "weft_queue_depth") == 2; });
  EXPECT_EQ(live(), 4);  // the queued instances wait: no room
  const serve::HttpResult refused = post({{"instances", {one}}});
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.retry_after, "1");
  EXPECT_NE(refused.body.find("overloaded (queue full)"), std::string::npos) << refused.body;
  ::close(holder);  // the holder goes away: the queued instances are decoded
  wait_until([&] { return metric(server_->metrics_text(), "weft_decode_sequences_total") >= 2; });
  ::close(queued);
  EXPECT_EQ(post({{"instances", {one}}}).status, 200);
}

// The tree2seq tests' expressions: a digit, one operator, two.
json test_trees() {
  return json::array(
      {json{{"number", 7}},
       json{{"op", "+"}, {"left", {{"number", 3}}}, {"right", {{"number", 4}}}},
       json{{"op", "*"},
            {"left", {{"op", "-"}, {"left", {{"number", 9}}}, {"right", {{"number", 2}}}}},
            {"right", {{"number", 5}}}}});
}

// Issue 41, item 3: a client that sends its request and half-closes (nc -N, socat) still reads
// its answer: every decoding model answers it 200 (HTTP/1.1 with an interim 100 Continue first,
// HTTP/1.0 without), greedy and beam. A client that closes is cancelled, and counted apart
// from the 400s.
TEST_F(DecodingServe, AHalfClosedClientIsAnsweredAndAClosedOneCountedApart) {
  const std::map<std::string, json> instances = {{"countdown", {{"count", 3000}, {"word", 2}}},
                                                 {"tree2seq", test_trees()[2]},
                                                 {"seq2tree", "((9 - 2) * 5)"}};
  for (const auto& [name, instance] : instances) {
    serve::ServerOptions options;
    options.models.push_back(
        {name, name == "countdown" ? checkpoint(name, 5000) : decoder_checkpoint(name)});
    start(options);
    for (const std::string version : {"HTTP/1.1", "HTTP/1.0"}) {
      for (const int beam : {0, 2}) {
        const std::string body = json{{"instances", {instance}}, {"beam", beam}}.dump();
        RawConnection c(port_);
        c.send(
            fmt::format("POST /v1/models/{}:predict {}\r\nHost: t\r\nContent-Length: "
                        "{}\r\n\r\n{}",
                        name, version, body.size(), body));
        c.half_close();
        const std::string answer = c.read_until_closed();
        EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos)
            << name << " " << version << " beam " << beam << ": " << answer.substr(0, 300);
        EXPECT_NE(answer.find("\"predictions\""), std::string::npos) << answer.substr(0, 300);
        if (version == "HTTP/1.0") {  // no 1xx answer to an HTTP/1.0 client
          EXPECT_EQ(answer.find("100 Continue"), std::string::npos);
        }
      }
    }
    const std::string m = server_->metrics_text();
    EXPECT_EQ(metric(m, "weft_decode_cancelled_total"), 0) << name;
    EXPECT_EQ(metric(m, "weft_requests_cancelled_total"), 0) << name;
    server_->stop();
    thread_.join();
    server_.reset();
  }
  // A client that closes mid-decode: cancelled, counted in no status.
  serve_countdown(1000000);
  const int fd = send_and_hold(port_, {{"instances", {{{"count", 900000}}}}});
  wait_until([&] { return live() == 1; });
  ::close(fd);
  wait_until([&] { return metric(server_->metrics_text(), "weft_requests_cancelled_total") == 1; });
  const std::string m = server_->metrics_text();
  EXPECT_EQ(metric(m, "weft_decode_cancelled_total"), 1);
  EXPECT_EQ(m.find("code=\"400\""), std::string::npos) << m;
}

// Issue 41, item 13: instances queued behind a full server whose clients close are dropped
// when their turn comes, never encoded; the server answers the next client as before.
TEST_F(DecodingServe, QueuedInstancesOfClientsGoneAreDroppedBeforeEncoding) {
  serve::ServerOptions options;
  options.max_live_sequences = 4;
  options.max_beam = 4;
  serve_countdown(100000, options);
  const int holder = send_and_hold(port_, {{"instances", {{{"count", 99000}}}}, {"beam", 4}});
  wait_until([&] { return live() == 4; });
  const double stepped_before =
      metric(server_->metrics_text(), "weft_decode_time_to_first_step_seconds_count");
  std::vector<int> queued;
  for (int c = 0; c < 5; ++c)
    queued.push_back(send_and_hold(port_, {{"instances", {{{"count", 50}}, {{"count", 60}}}}}));
  wait_until([&] { return metric(server_->metrics_text(), "weft_queue_depth") == 10; });
  for (const int fd : queued) ::close(fd);
  ::close(holder);
  wait_until([&] { return metric(server_->metrics_text(), "weft_decode_dropped_total") == 10; });
  wait_until([&] { return metric(server_->metrics_text(), "weft_requests_cancelled_total") == 6; });
  const std::string m = server_->metrics_text();
  EXPECT_EQ(metric(m, "weft_decode_cancelled_total"), 1);  // the holder, live
  EXPECT_EQ(metric(m, "weft_decode_time_to_first_step_seconds_count"), stepped_before);
  EXPECT_EQ(metric(m, "weft_queue_depth"), 0);
  EXPECT_EQ(post({{"instances", {{{"count", 5}}}}}).status, 200);
}

// One decoding answer's hypothesis in the schema README "Serving" writes down (`bound`: the
// steps the request or the server allowed, -1: the model's own); whether it ended.
bool check_hypothesis(const json& h, const std::string& model, std::int64_t bound) {
  EXPECT_TRUE(h.at("ended").is_boolean()) << h;
  EXPECT_TRUE(h.at("length").is_number_unsigned()) << h;
  EXPECT_TRUE(h.at("log_prob").is_number() && h.at("score").is_number()) << h;
  const bool ended = h.at("ended").get<bool>();
  EXPECT_EQ(h.contains("stopped"), !ended) << h;
  const std::string end = model == "seq2tree" ? "the tree was complete" : "the end token";
  if (!ended) {  // it stopped at its bound: the request's, or below it the example's own
    EXPECT_EQ(h["stopped"],
              fmt::format("the step bound of {} was reached before {}", h["length"].dump(), end));
    EXPECT_TRUE(bound < 0 || h["length"].get<std::int64_t>() <= bound) << h;
  }
  const bool payload =
      model == "countdown"
          ? h.at("tokens").size() == h["length"].get<std::size_t>()
          : h.at("text").is_string() && (model == "tree2seq" || h.at("expression").is_object() ||
                                         (h["expression"].is_null() && h["length"] == 0));
  EXPECT_TRUE(payload) << model << ": " << h;
  return ended;
}

// Issue 41, item 9: every decoding model answers in one schema, at its bound too ("ended":
// false and "stopped" saying why), greedy and beam; "max_steps" beyond what the model ever
// decodes, or the server allows, is a 400 naming the limit, never silently capped.
TEST_F(DecodingServe, EveryDecodingModelAnswersInOneSchemaAndRefusesStepsBeyondItsBound) {
  const json trees = test_trees();
  const std::map<std::string, std::pair<json, int>> models = {
      // instances, longest decoding
      {"countdown", {json::array({{{"count", 5}}, {{"count", 9}, {"word", 3}}}), 65}},
      {"tree2seq", {trees, 256}},
      {"seq2tree", {json::array({"(3 + 4)", "((9 - 2) * 5)", "(1 - (2 + 8))"}), 128}}};
  for (const auto& [name, model] : models) {
    const auto& [instances, longest] = model;
    for (const std::int32_t server_bound : {0, 1000, 3}) {
      serve::ServerOptions options;
      options.models.push_back(
          {name, name == "countdown" ? checkpoint(name, 64) : decoder_checkpoint(name)});
      options.max_decode_steps = server_bound;
      start(options);
      int stopped = 0;
      for (const int beam : {0, 2}) {
        for (const int steps : {0, 2}) {
          json body = {{"instances", instances}, {"beam", beam}};
          if (steps > 0) body["max_steps"] = steps;
          const serve::HttpResult r = post(body, name);
          ASSERT_EQ(r.status, 200) << name << " " << body.dump() << ": " << r.body;
          const int bound = steps > 0 ? steps : server_bound == 3 ? 3 : -1;
          const json answer = json::parse(r.body);
          for (const json& p : answer.at("predictions")) {
            stopped += !check_hypothesis(p, name, bound);
            EXPECT_EQ(p.contains("beams"), beam > 0) << p;
            for (const json& h : p.value("beams", json::array())) check_hypothesis(h, name, bound);
          }
        }
      }
      EXPECT_GT(stopped, 0) << name << " never reached its bound";
      const bool server_limits = server_bound > 0 && server_bound <= longest;
      const std::string says =
          server_limits
              ? fmt::format("is more than this server allows ({}; --max-decode-steps)",
                            server_bound)
              : fmt::format("is more than model '{}' ever decodes ({} steps)", name, longest);
      for (const std::int64_t too_many :
           {std::int64_t(server_limits ? server_bound : longest) + 1, std::int64_t(1000000000)}) {
        const serve::HttpResult r = post({{"instances", instances}, {"max_steps", too_many}}, name);
        EXPECT_EQ(r.status, 400) << name << " max_steps " << too_many << ": " << r.body;
        EXPECT_EQ(json::parse(r.body).value("error", ""),
                  fmt::format("\"max_steps\": {} {}", too_many, says));
      }
      server_->stop();
      thread_.join();
      server_.reset();
    }
  }
}

TEST_F(DecodingServe, AProgramThatThrowsFailsItsInstanceAlone) {
  const std::string path = checkpoint("countdown", 64);
  serve::ServerOptions options;
  options.models.push_back({"countdown", path});
  options.overrides = {{"fail_word", 7}};  // word 7's step throws
  start(options);
  const json good = {{"count", 6}, {"word", 3}}, bad = {{"count", 6}, {"word", 7}};
  const json expected = infer(path, {good}, 0)[0];
  std::vector<std::future<serve::HttpResult>> mixed, healthy;
  for (int c = 0; c < 8; ++c) {
    mixed.push_back(std::async(std::launch::async, [&] {
      return post({{"instances", {good, bad}}});
    }));
    healthy.push_back(std::async(std::launch::async, [&] {
      return post({{"instances", {good}}});
    }));
  }
  for (auto& f : healthy) {
    const serve::HttpResult r = f.get();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(same_decoding(json::parse(r.body)["predictions"][0], expected));
  }
  for (auto& f : mixed) {
    const serve::HttpResult r = f.get();
    ASSERT_EQ(r.status, 400) << r.body;
    const json body = json::parse(r.body);
    EXPECT_TRUE(same_decoding(body["predictions"][0], expected));
    EXPECT_EQ(body["errors"].size(), 1u);
    EXPECT_EQ(body["errors"][0]["index"], 1);
    EXPECT_NE(body["error"].get<std::string>().find("word 7 fails this decoder"), std::string::npos)
        << body["error"];
  }
}
// Equal JSON, numbers within 1e-4 (a batch's float32 sums may differ in the last bits).
bool same_answer(const json& a, const json& b) {
  if (a.is_number_float() || b.is_number_float())
    return a.is_number() && b.is_number() &&
           std::abs(a.get<double>() - b.get<double>()) <= 1e-4 * (1 + std::abs(b.get<double>()));
  if (a.is_number() && b.is_number()) return a.get<std::int64_t>() == b.get<std::int64_t>();
  if (a.type() != b.type() || a.size() != b.size()) return false;
  if (a.is_object()) {
    for (const auto& [key, value] : a.items())
      if (!b.contains(key) || !same_answer(value, b[key])) return false;
    return true;
  }
  if (a.is_array()) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same_answer(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

// tree2seq and seq2tree (untrained, weights spread so that outputs vary in length): answers
// equal weft infer's, greedy and beam 2, under concurrent clients.
TEST_F(DecodingServe, Tree2SeqAndSeq2TreeAnswerAsInferUnderConcurrentClients) {
  const json trees = test_trees();
  const json texts = json::array({"7", "(3 + 4)", "((9 - 2) * 5)", "(1 - (2 + 8))"});
  for (const std::string name : {"tree2seq", "seq2tree"}) {
    const std::string path = decoder_checkpoint(name);
    const json& instances = name == "tree2seq" ? trees : texts;
    // Beam 1, beam 2 and beam 2 ranked with a length penalty of 1.
    const std::vector<json> searches = {
        {{"beam", 1}}, {{"beam", 2}}, {{"beam", 2}, {"length_penalty", 1.0}}};
    std::vector<std::vector<json>> expected;
    for (const json& search : searches) {
      std::unique_ptr<Model> infer = load_model(path, ModelUse::kInfer, search);
      std::vector<json> parsed;
      for (const json& i : instances)
        parsed.push_back(
            infer->parse_example(i.is_string() ? i.get<std::string>() : i.dump(), "t"));
      expected.push_back(infer->predict(parsed));
    }
    serve::ServerOptions options;
    options.models.push_back({name, path});
    start(options);
    std::atomic<int> mismatches{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < 12; ++c)
      clients.emplace_back([&, c] {
        const std::size_t search = std::size_t(c) % searches.size();
        json body = searches[search];
        body["instances"] = instances;
        for (int r = 0; r < 3; ++r) {
          const serve::HttpResult res = post(body, name);
          const json got = json::parse(res.body, nullptr, false);
          for (std::size_t i = 0; i < instances.size(); ++i)
            if (res.status != 200 || !same_answer(got["predictions"][i], expected[search][i]))
              if (mismatches++ < 3)
                ADD_FAILURE() << name << " " << searches[search].dump() << ": " << res.status << " "
                              << res.body << " vs " << expected[search][i].dump();
        }
      });
    for (std::thread& t : clients) t.join();
    EXPECT_EQ(mismatches, 0) << name;
    EXPECT_GT(metric(server_->metrics_text(), "weft_decode_steps_total"), 0) << name;
    server_->stop();
    thread_.join();
    server_.reset();
  }
}

// In the batch-invariant mode (weft/backend/cpu.h) a request's answer does not depend on which
// requests its steps share: greedy and beam decodings of clients joining a running batch equal
// each example decoded alone, tokens, log_prob and beams, to the bit.
TEST_F(DecodingServe, InTheBatchInvariantModeJoiningClientsGetTheirAloneAnswersToTheBit) {
  const bool was_invariant = batch_invariant();
  set_batch_invariant(true);
  const std::string path = serve_countdown(64);
  std::vector<json> examples;
  for (int i = 0; i < 12; ++i) examples.push_back({{"count", (i * 11) % 41}, {"word", 1 + i % 8}});
  std::map<int, std::vector<json>> alone;  // by beam width
  for (int beam : {0, 3})
    for (const json& e : examples) alone[beam].push_back(infer(path, {e}, beam).at(0));
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      serve::HttpClient client("127.0.0.1", port_);
      for (int r = 0; r < 3; ++r) {
        std::this_thread::sleep_for(std::chrono::microseconds(400 * ((c * 3 + r) % 7)));
        const std::size_t first = std::size_t(c * 5 + r) % examples.size();
        const int beam = (c + r) % 2 == 0 ? 0 : 3;
        json body = {{"instances", {examples[first], examples[(first + 4) % examples.size()]}}};
        if (beam > 0) body["beam"] = beam;
        const serve::HttpResult res = client.post("/v1/models/countdown:predict", body.dump());
        if (res.status != 200) {
          if (failures++ < 3) ADD_FAILURE() << res.status << " " << res.body << res.error;
          continue;
        }
        const json got = json::parse(res.body).at("predictions");
        for (std::size_t k = 0; k < 2; ++k) {
          const json& want = alone[beam][(first + 4 * k) % examples.size()];
          if (got.at(k) != want && mismatches++ < 3)
            ADD_FAILURE() << got.at(k).dump() << " vs alone " << want.dump();
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  set_batch_invariant(was_invariant);
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
