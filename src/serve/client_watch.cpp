// The client watch (client_watch.h): one epoll set over the connections of live requests, a
// poll over those of queued ones, and the interim answer that tells a half-close from a close.
#include "client_watch.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include "weft/core/error.h"

namespace weft::serve::detail {

ClientWatch::ClientWatch() : epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (epoll_fd_ < 0) fail("weft serve", "epoll_create1 failed: ", std::strerror(errno));
}

ClientWatch::~ClientWatch() { ::close(epoll_fd_); }

unsigned ClientWatch::interest(const PendingRequest& request) {
  return request.asked ? 0u : unsigned(EPOLLRDHUP);  // EPOLLHUP, EPOLLERR: always reported
}

void ClientWatch::watch(PendingRequest& request) {
  const int fd = request.client_fd;
  if (fd < 0) return;
  Watched& w = watched_[fd];
  if (w.live++ > 0) return;
  w.request = &request;
  epoll_event event{};
  event.events = interest(request);
  event.data.fd = fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);  // a failure leaves it unwatched
}

void ClientWatch::unwatch(PendingRequest& request) {
  const int fd = request.client_fd;
  if (fd < 0) return;
  const auto it = watched_.find(fd);
  if (it == watched_.end() || --it->second.live > 0) return;
  watched_.erase(it);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

bool ClientWatch::judge(PendingRequest& request, bool hung_up, bool end_of_stream) {
  if (hung_up) return true;
  if (!end_of_stream || request.asked) return false;
  request.asked = true;
  if (!request.interim_allowed) return false;
  static constexpr std::string_view kInterim = "HTTP/1.1 100 Continue\r\n\r\n";
  const ssize_t n =
      ::send(request.client_fd, kInterim.data(), kInterim.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

bool ClientWatch::mark_gone() {
  if (watched_.empty()) return false;
  std::array<epoll_event, 64> events;  // more at once: the rest at the next call
  const int ready = ::epoll_wait(epoll_fd_, events.data(), int(events.size()), 0);
  bool any = false;
  for (int i = 0; i < ready; ++i) {
    const epoll_event& e = events[std::size_t(i)];
    const auto it = watched_.find(e.data.fd);
    if (it == watched_.end()) continue;
    PendingRequest& request = *it->second.request;
    if (judge(request, e.events & (EPOLLHUP | EPOLLERR), e.events & EPOLLRDHUP)) {
      request.abandoned = true;
      any = true;
      continue;
    }
    epoll_event changed{};
    changed.events = interest(request);
    changed.data.fd = e.data.fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, e.data.fd, &changed);
  }
  return any;
}

void ClientWatch::mark_gone_now(std::span<PendingRequest* const> requests) {
  std::vector<pollfd> polled;
  std::vector<PendingRequest*> owners;
  for (PendingRequest* r : requests) {
    if (r->client_fd < 0 || r->abandoned) continue;
    polled.push_back({r->client_fd, short(r->asked ? 0 : POLLRDHUP), 0});
    owners.push_back(r);
  }
  for (int round = 0; round < 2 && !polled.empty(); ++round) {
    if (::poll(polled.data(), polled.size(), 0) <= 0) return;
    std::vector<pollfd> asked;
    std::vector<PendingRequest*> asked_owners;
    for (std::size_t i = 0; i < polled.size(); ++i) {
      PendingRequest& r = *owners[i];
      const bool was_asked = r.asked;
      if (judge(r, polled[i].revents & (POLLHUP | POLLERR), polled[i].revents & POLLRDHUP)) {
        r.abandoned = true;
      } else if (r.asked && !was_asked && r.interim_allowed) {
        asked.push_back({r.client_fd, 0, 0});  // a closed client resets: look once more
        asked_owners.push_back(&r);
      }
    }
    polled.swap(asked);
    owners.swap(asked_owners);
  }
}

}  // namespace weft::serve::detail
