// Which clients of waiting predict requests went away (private to the server), for the decoding
// loop, which retires their sequences and drops their queued instances before encoding them.
//
// A client that half-closes (shutdown(SHUT_WR) after its request, as nc -N, socat and some
// proxies do) still reads its answer, so an end of stream from a client proves nothing: it looks
// the same as a close. What does prove it gone is a reset or hang-up (POLLHUP / POLLERR) or a
// write that fails. So at a client's end of stream the watch writes an interim
// "HTTP/1.1 100 Continue" (RFC 9110 15.2: an HTTP/1.1 client must read 1xx answers before the
// final one, expected or not): a client that still reads takes it in, one that closed answers
// it with a reset, seen at the next check. HTTP/1.0 forbids 1xx answers, so an HTTP/1.0 client
// that stops sending is only known gone when its connection resets or hangs up.
#pragma once

#include <span>
#include <unordered_map>

#include "model_worker.h"

namespace weft::serve::detail {

class ClientWatch {
 public:
  ClientWatch();
  ~ClientWatch();
  ClientWatch(const ClientWatch&) = delete;
  ClientWatch& operator=(const ClientWatch&) = delete;

  // One more (watch) or one fewer (unwatch) of the request's instances is live; its connection
  // is watched while any is (unwatch before answering: the connection may then carry the
  // client's next request).
  void watch(PendingRequest& request);
  void unwatch(PendingRequest& request);
  // Asks the kernel once for the watched connections that changed; marks the requests whose
  // client went away (PendingRequest::abandoned). True when any did.
  bool mark_gone();
  // Marks those of `requests` whose client went away, now: one poll over their connections
  // (and one more over those just asked with an interim answer, which a closed client resets
  // at once on loopback).
  void mark_gone_now(std::span<PendingRequest* const> requests);

 private:
  // The connection's events: hung up or failed, or the client's end of stream (answered with
  // the interim answer once). True when the client is gone.
  static bool judge(PendingRequest& request, bool hung_up, bool end_of_stream);
  // The epoll events to watch `request`'s connection for: its end of stream until asked.
  static unsigned interest(const PendingRequest& request);

  struct Watched {
    PendingRequest* request;
    std::size_t live;
  };
  int epoll_fd_ = -1;
  std::unordered_map<int, Watched> watched_;  // connection -> its request and live instances
};

}  // namespace weft::serve::detail
