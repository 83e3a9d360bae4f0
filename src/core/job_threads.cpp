// JobThreads: a fixed set of threads taking queued jobs in order until destroyed.
#include "weft/core/job_threads.h"

#include <utility>

#include "weft/core/error.h"

namespace weft {

JobThreads::JobThreads(int threads) {
  if (threads < 1) fail("job threads", "need at least one thread, got ", threads);
  threads_.reserve(std::size_t(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

JobThreads::~JobThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  jobs_changed_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void JobThreads::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  jobs_changed_.notify_one();
}

void JobThreads::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      jobs_changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;  // jobs left are not needed any more
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace weft
