// Threads kept for the life of a loop that prepares work ahead (weaving batch k + 1 while batch
// k runs): they run submitted jobs in the order submitted. One thread made per loop, not per
// batch (a thread's start costs as much as weaving a small batch). Pair each job with a
// ClaimableTask so that a job still queued is done by whoever needs its result first.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft {

class JobThreads {
 public:
  explicit JobThreads(int threads);
  // Jobs not begun are dropped (their ClaimableTasks are then done by their takers, or not
  // needed); jobs begun are finished first.
  ~JobThreads();
  JobThreads(const JobThreads&) = delete;
  JobThreads& operator=(const JobThreads&) = delete;

  // `job` must not throw (a ClaimableTask keeps its work's failure for take()).
  void submit(std::function<void()> job);

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable jobs_changed_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace weft
WEFT_API_END
