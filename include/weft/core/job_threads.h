// Threads kept for the life of a loop that prepares work ahead (weaving batch k + 1 while batch
// k runs): they run submitted jobs in the order submitted, each off the CPU its submitter was
// on where another is allowed (the point is to work beside it). One thread made per loop, not
// per batch (a thread's start costs half of weaving a small batch). Pair each job with a
// ClaimableTask so that a job still queued is done by whoever needs its result first, or with a
// promise where the job must run here, beside its submitter (the Trainer's batch preparer).
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
  struct Job {
    std::function<void()> run;
    int submitter_cpu = -1;  // where submit() ran (-1: unknown): the job runs elsewhere
  };
  void work();

  std::mutex mutex_;
  std::condition_variable jobs_changed_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace weft
WEFT_API_END
