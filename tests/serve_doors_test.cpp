// The server's doors against a hostile or merely unusual client (issue 41), each on a real
// server on loopback: bodies read as JSON whatever their Content-Type, header lines that could
// be read two ways, methods no route answers, :reload paths with control characters, and a
// request larger than the queue could ever hold.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "serve_test_util.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/serve/client.h"

namespace {

using namespace weft;
using nlohmann::json;
using weft::testing::LoopbackServer;
using weft::testing::RawConnection;

class Doors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("weft_doors_test_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    models::OptionValues o = models::find_model("calculator").default_options();
    o.update({{"hidden", 8}, {"max_train", 4}, {"max_eval", 4}, {"seed", 3}}, "test");
    calculator_ = (dir_ / "calc.safetensors").string();
    models::save_model(calculator_, *models::create_model(o));
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  void start(serve::ServerOptions options = {}) {
    options.models = {{"calculator", calculator_}};
    options.http_threads = 16;
    server_ = std::make_unique<LoopbackServer>(std::move(options));
  }
  // The whole answer to `request` sent on a fresh connection.
  std::string exchange(const std::string& request) {
    RawConnection c(server_->port());
    c.send(request);
    return c.read_until_closed();
  }
  static std::string post_request(const std::string& path, const std::string& headers,
                                  const std::string& body) {
    return fmt::format(
        "POST {} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{}Content-Length: {}"
        "\r\n\r\n{}",
        path, headers, body.size(), body);
  }
  // The JSON body of an answer (after its headers).
  static json body_of(const std::string& answer) {
    const std::size_t at = answer.find("\r\n\r\n");
    return at == std::string::npos ? json() : json::parse(answer.substr(at + 4), nullptr, false);
  }

  std::filesystem::path dir_;
  std::string calculator_;
  std::unique_ptr<LoopbackServer> server_;
};

const std::string kPredict = "/v1/models/calculator:predict";

// `instances` calculator instances, padded with spaces to exactly `bytes` bytes.
std::string padded_body(std::size_t instances, std::size_t bytes) {
  json list = json::array();
  for (std::size_t i = 0; i < instances; ++i) list.push_back({{"number", int(i % 10)}});
  std::string body = json{{"instances", list}}.dump();
  body.insert(body.size() - 1, bytes - body.size(), ' ');
  return body;
}

// Item 2: what curl -d and urllib send (application/x-www-form-urlencoded), a multipart label,
// a text label or none: the body is read as JSON, whatever its size up to --max-body-bytes.
TEST_F(Doors, ABodyIsJsonWhateverItsContentTypeSays) {
  start();
  for (const std::size_t bytes : {std::size_t(8193), std::size_t(1000000)}) {
    const std::size_t instances = bytes > 10000 ? 1000 : 100;
    const std::string body = padded_body(instances, bytes);
    ASSERT_EQ(body.size(), bytes);
    json first;
    for (const std::string type : {"application/x-www-form-urlencoded", "application/json", "",
                                   "multipart/form-data; boundary=x", "text/plain"}) {
      const std::string header = type.empty() ? "" : "Content-Type: " + type + "\r\n";
      const std::string answer = exchange(post_request(kPredict, header, body));
      ASSERT_NE(answer.find("HTTP/1.1 200"), std::string::npos)
          << bytes << " bytes as '" << type << "': " << answer.substr(0, 300);
      const json predictions = body_of(answer).at("predictions");
      EXPECT_EQ(predictions.size(), instances);
      if (first.is_null()) first = predictions;
      EXPECT_EQ(predictions, first) << type;
    }
  }
  // The client library's form label, as curl -d sends it, on one keep-alive connection.
  serve::HttpClient client("127.0.0.1", server_->port());
  const serve::HttpResult form =
      client.post(kPredict, padded_body(100, 8193), "application/x-www-form-urlencoded");
  EXPECT_EQ(form.status, 200) << form.body;
  // Over the limit, the size message is true.
  const serve::HttpResult large =
      client.post(kPredict, padded_body(10, 5u << 20), "application/x-www-form-urlencoded");
  EXPECT_EQ(large.status, 413);
}

// Item 12: header lines the server and cpp-httplib could read two ways are refused, each
// saying what is wrong; the token is compared as sent.
TEST_F(Doors, HeadersThatCouldBeReadTwoWaysAreRefusedSayingWhy) {
  serve::ServerOptions options;
  options.auth_token = "0123456789abcdef-secret";
  start(options);
  const std::string good = "Authorization: Bearer 0123456789abcdef-secret\r\n";
  const auto get = [&](const std::string& headers) {
    return exchange("GET /v1/models HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + headers +
                    "\r\n");
  };
  const auto expect = [](const std::string& answer, int status, const std::string& says) {
    EXPECT_NE(answer.find(fmt::format("HTTP/1.1 {}", status)), std::string::npos)
        << answer.substr(0, 300);
    const json body = body_of(answer);
    ASSERT_TRUE(body.is_object()) << answer;
    EXPECT_NE(body.value("error", "").find(says), std::string::npos)
        << answer.substr(0, 300) << "\nlacks: " << says;
  };
  EXPECT_NE(get(good).find("HTTP/1.1 200"), std::string::npos);
  // A NUL (or any control character) in a value: refused, not cut.
  std::string nul = "Authorization: Bearer 0123456789abcdef-secret";
  nul += '\0';
  nul += "junk\r\n";
  expect(get(nul), 400, "the header 'Authorization' holds a control character (0x00)");
  expect(get("X-Note: a\x01z\r\n"), 400, "the header 'X-Note' holds a control character (0x01)");
  // Two tokens: which one counts is not the server's guess.
  expect(get(good + "Authorization: Bearer wrong-but-second\r\n"), 400,
         "more than one Authorization header");
  expect(get(good + "Host: u\r\n"), 400, "more than one Host header");
  // A percent sign is a byte of the token, not an escape.
  expect(get("Authorization: Bearer 0123456789abcdef-secre%74\r\n"), 401, "not this server's");
  // A line longer than cpp-httplib reads: 431 naming it, not a bare "bad request".
  expect(get("Authorization: Bearer " + std::string(15000, 'a') + "\r\n"), 431,
         "the header 'Authorization' is longer than");
  // Methods no path answers.
  const std::string trace =
      exchange("TRACE /v1/models HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + good + "\r\n");
  expect(trace, 405, "TRACE");
  EXPECT_NE(trace.find("Allow: GET, HEAD, POST"), std::string::npos) << trace;
  expect(exchange("BREW /v1/models HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + good + "\r\n"),
         501, "the method 'BREW' is not implemented");
  // Counted among the front's answers.
  EXPECT_NE(server_->server().metrics_text().find("weft_http_errors_total{code=\"431\"} 1"),
            std::string::npos);
}

// Item 11: a :reload path with a control character is refused before any file is opened, and
// what a failed reload logs is one line whatever the file's bytes.
TEST_F(Doors, ReloadPathsWithControlCharactersAreRefusedAndLoggedEscaped) {
  start();
  const std::string reload = "/v1/models/calculator:reload";
  serve::HttpClient client("127.0.0.1", server_->port());
  for (const std::string& tail : {std::string("\nweft serve: forged", 19), std::string("\0x", 2),
                                  std::string("\x1b[2J", 4), std::string("\xc2\x85", 2)}) {
    const serve::HttpResult r =
        client.post(reload, json{{"checkpoint", calculator_ + tail}}.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("control character"), std::string::npos) << r.body;
  }
  // A header length, then a header whose bytes hold newlines (the loader's message may quote
  // them).
  const std::string junk_bytes("\x10\0\0\0\0\0\0\0{\n\"forged\":\n\"line\"\n", 24);
  std::ofstream(dir_ / "junk.safetensors", std::ios::binary) << junk_bytes;
  std::ostringstream log;
  std::streambuf* const old = std::cerr.rdbuf(log.rdbuf());
  const serve::HttpResult junk =
      client.post(reload, json{{"checkpoint", (dir_ / "junk.safetensors").string()}}.dump());
  std::cerr.rdbuf(old);
  EXPECT_EQ(junk.status, 400) << junk.body;
  const std::string logged = log.str();
  EXPECT_NE(logged.find("reload of calculator"), std::string::npos) << logged;
  EXPECT_EQ(std::count(logged.begin(), logged.end(), '\n'), 1) << logged;
  // The checkpoint in use is unchanged.
  const json models = json::parse(client.get("/v1/models").body);
  EXPECT_EQ(models["models"][0]["checkpoint"], calculator_);
}

// Item 10: more instances than --max-queue can never be queued: a 400 naming the limit, not a
// 503 asking to retry.
TEST_F(Doors, ARequestLargerThanTheQueueIsRefusedNamingTheLimit) {
  serve::ServerOptions options;
  options.max_queue = 8;
  start(options);
  serve::HttpClient client("127.0.0.1", server_->port());
  const json one = {{"number", 5}};
  json nine = json::array();
  for (int i = 0; i < 9; ++i) nine.push_back(one);
  const serve::HttpResult refused = client.post(kPredict, json{{"instances", nine}}.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(refused.retry_after, "");
  EXPECT_NE(refused.body.find("9 instances can never fit the queue of model 'calculator' (8; "
                              "--max-queue)"),
            std::string::npos)
      << refused.body;
  nine.erase(nine.begin());
  EXPECT_EQ(client.post(kPredict, json{{"instances", nine}}.dump()).status, 200);
}

}  // namespace
