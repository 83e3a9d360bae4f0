// Raw HTTP requests to `weft serve` — request line, the model's name in the path, headers,
// body, pipelined requests — answered as a connection's are (serve::Server::answer_raw: the
// request framing and limits, then the routes and handlers a worker runs), with a small
// untrained calculator served. Every answer must be well-formed HTTP whose JSON bodies parse.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "fuzz_target.h"
#include "weft/models/registry.h"
#include "weft/models/saved_model.h"
#include "weft/serve/server.h"

using namespace weft;

namespace {

serve::Server& server() {
  // Never destroyed: its worker threads outlive every input.
  static serve::Server* const instance = [] {
    models::OptionValues options = models::find_model("calculator").default_options();
    options.update({{"hidden", 8}, {"max_train", 4}, {"max_eval", 4}}, "fuzz");
    const std::unique_ptr<models::Model> model = models::create_model(options);
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("weft_fuzz_serve_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string checkpoint = (dir / "calculator.safetensors").string();
    models::save_model(checkpoint, *model);
    serve::ServerOptions served;
    served.models = {{"calculator", checkpoint}};
    served.max_body_bytes = 65536;
    served.max_instances = 64;
    served.max_depth = 64;
    return new serve::Server(served);
  }();
  return *instance;
}

// Checks one response at the front of `bytes` and removes it; throws (a bug) when malformed.
// A response to HEAD has its GET's headers, Content-Length included, and no body (RFC 9110
// 9.3.2): when the input may hold a HEAD request, a response whose header end is followed by
// nothing or by the next response counts as one.
void check_response(std::string& bytes, bool may_answer_head) {
  if (bytes.rfind("HTTP/1.1 ", 0) != 0) throw std::logic_error("a response without a status line");
  const std::size_t head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string::npos) throw std::logic_error("a response without a header end");
  const std::string head = bytes.substr(0, head_end + 2);
  const std::size_t length_at = head.find("Content-Length: ");
  const std::size_t length =
      length_at == std::string::npos ? 0 : std::stoul(head.substr(length_at + 16));
  const bool bodiless = may_answer_head && (bytes.size() == head_end + 4 ||
                                            bytes.compare(head_end + 4, 9, "HTTP/1.1 ") == 0);
  if (bodiless) {
    bytes.erase(0, head_end + 4);
    return;
  }
  if (head_end + 4 + length > bytes.size()) throw std::logic_error("a response cut short");
  const std::string body = bytes.substr(head_end + 4, length);
  if (head.find("Content-Type: application/json") != std::string::npos) {
    // A non-weft exception, so a bug, when the body is not JSON.
    if (nlohmann::json::parse(body).is_discarded()) throw std::logic_error("unreachable");
  }
  bytes.erase(0, head_end + 4 + length);
}

}  // namespace

WEFT_FUZZ_TARGET(serve_request) {
  std::string responses = server().answer_raw(input);
  const bool may_answer_head = input.find("HEAD") != std::string_view::npos;
  while (!responses.empty()) check_response(responses, may_answer_head);
}
