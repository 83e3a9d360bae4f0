// JobThreads: a fixed set of threads taking queued jobs in order until destroyed. A job is run
// away from the CPU of the thread that submitted it where the scheduler woke its thread there
// (the submitter goes on working: sharing its CPU, the job would be paid in turn, not beside).
#include "weft/core/job_threads.h"

#include <utility>

#include "weft/core/error.h"

#ifdef __linux__
#include <sched.h>
#endif

namespace weft {
namespace {

int current_cpu() {
#ifdef __linux__
  return sched_getcpu();
#else
  return -1;
#endif
}

// For its life, keeps this thread off `cpu` when this thread is on it and may run elsewhere
// (Linux wakes a thread on its waker's CPU when it judges their data shared, and a short job
// can then run and end there before any load balancing); the thread's CPU mask is restored
// after, so a mask the process was given (taskset, cgroups) stays what it was.
class AwayFromCpu {
 public:
  explicit AwayFromCpu(int cpu) {
#ifdef __linux__
    if (cpu < 0 || current_cpu() != cpu || sched_getaffinity(0, sizeof(saved_), &saved_) != 0)
      return;
    cpu_set_t others = saved_;
    CPU_CLR(cpu, &others);
    moved_ = CPU_COUNT(&others) > 0 && sched_setaffinity(0, sizeof(others), &others) == 0;
#endif
  }
  ~AwayFromCpu() {
#ifdef __linux__
    if (moved_) sched_setaffinity(0, sizeof(saved_), &saved_);
#endif
  }
  AwayFromCpu(const AwayFromCpu&) = delete;
  AwayFromCpu& operator=(const AwayFromCpu&) = delete;

 private:
#ifdef __linux__
  cpu_set_t saved_{};
#endif
  bool moved_ = false;
};

}  // namespace

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
    jobs_.push_back(Job{std::move(job), current_cpu()});
  }
  jobs_changed_.notify_one();
}

void JobThreads::work() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      jobs_changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;  // jobs left are not needed any more
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    const AwayFromCpu away(job.submitter_cpu);
    job.run();
  }
}

}  // namespace weft
