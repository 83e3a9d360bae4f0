// Work prepared ahead (core/claimable_task.h, core/job_threads.h): a claimable task is done
// once, by whoever claims it first, its failure rethrown to the taker; job threads run jobs in
// the order submitted, off the submitting thread, and on destruction drop the jobs not begun,
// so that every task paired with them is still done exactly once, by its taker.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "weft/core/claimable_task.h"
#include "weft/core/error.h"
#include "weft/core/job_threads.h"

#ifdef __linux__
#include <sched.h>
#endif

namespace weft {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(ClaimableTask, TheTakerDoesUnclaimedWorkOnceAndAHelperDoesClaimedWork) {
  std::atomic<int> runs{0};
  ClaimableTask<int> alone([&] { return ++runs * 10; });
  EXPECT_EQ(alone.take(), 10);  // nobody claimed it: done by the taker
  EXPECT_EQ(runs.load(), 1);

  std::thread::id worker;
  ClaimableTask<int> helped([&] {
    worker = std::this_thread::get_id();
    return ++runs * 10;
  });
  std::thread helper([&] { helped.run_if_unclaimed(); });
  helper.join();              // the helper claimed and did it
  helped.run_if_unclaimed();  // claimed already: nothing more
  EXPECT_EQ(helped.take(), 20);
  EXPECT_EQ(runs.load(), 2);
  EXPECT_NE(worker, std::this_thread::get_id());
}

TEST(ClaimableTask, AFailureReachesTheTaker) {
  ClaimableTask<int> failing([]() -> int { fail("weave", "example 3 is malformed"); });
  std::thread helper([&] { failing.run_if_unclaimed(); });  // the helper keeps the failure
  helper.join();
  EXPECT_THAT([&] { failing.take(); },
              ThrowsMessage<weft::Error>(HasSubstr("[weave] example 3 is malformed")));
}

TEST(JobThreads, OneThreadRunsTheJobsInOrderOffTheSubmittingThread) {
  std::mutex mutex;
  std::condition_variable ran;
  std::vector<int> order;
  std::vector<std::thread::id> ran_on;
  JobThreads one(1);
  for (int k = 0; k < 50; ++k)
    one.submit([&, k] {
      std::lock_guard<std::mutex> lock(mutex);
      order.push_back(k);
      ran_on.push_back(std::this_thread::get_id());
      ran.notify_all();
    });
  std::unique_lock<std::mutex> lock(mutex);
  ASSERT_TRUE(ran.wait_for(lock, std::chrono::seconds(60), [&] { return order.size() == 50; }));
  for (int k = 0; k < 50; ++k) {
    EXPECT_EQ(order[std::size_t(k)], k);
    EXPECT_NE(ran_on[std::size_t(k)], std::this_thread::get_id());
  }
}

TEST(JobThreads, JobsDroppedUnbegunAreDoneOnceByTheirTakers) {
  for (int threads : {1, 3}) {
    std::atomic<int> runs{0};
    std::vector<std::shared_ptr<ClaimableTask<int>>> tasks;
    std::optional<JobThreads> workers(std::in_place, threads);
    for (int k = 0; k < 200; ++k) {
      tasks.push_back(std::make_shared<ClaimableTask<int>>([&runs, k] {
        ++runs;
        return k * k;
      }));
      workers->submit([task = tasks.back()] { task->run_if_unclaimed(); });
    }
    workers.reset();  // whatever the threads had not begun is dropped
    for (int k = 0; k < 200; ++k) EXPECT_EQ(tasks[std::size_t(k)]->take(), k * k);
    EXPECT_EQ(runs.load(), 200) << threads << " threads";
  }
}

#ifdef __linux__
// The CPU a job ran on, and whether its thread's mask then held `cpu`.
struct Placement {
  int cpu = -1;
  bool mask_holds = false;
};

Placement placement_of_a_job(JobThreads& threads, int submit_on, int mask_cpu) {
  cpu_set_t only;
  CPU_ZERO(&only);
  CPU_SET(submit_on, &only);
  EXPECT_EQ(sched_setaffinity(0, sizeof(only), &only), 0);  // this thread: on submit_on alone
  std::promise<Placement> ran;
  threads.submit([&] {
    cpu_set_t mask;
    sched_getaffinity(0, sizeof(mask), &mask);
    ran.set_value(Placement{sched_getcpu(), CPU_ISSET(mask_cpu, &mask) != 0});
  });
  return ran.get_future().get();
}

TEST(JobThreads, AJobRunsOffItsSubmittersCpuAndTheMaskIsGivenBack) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) GTEST_SKIP() << "this process may run on one CPU only";
  JobThreads one(1);  // made before this thread is pinned: it may run on every allowed CPU
  for (int round = 0; round < 20; ++round) {
    const Placement first = placement_of_a_job(one, cpus[0], cpus[1]);
    EXPECT_NE(first.cpu, cpus[0]);
    // Submitted from the other CPU: cpus[0] is back in the thread's mask (given back after the
    // first job), whatever this job's own move.
    const Placement second = placement_of_a_job(one, cpus[1], cpus[0]);
    EXPECT_NE(second.cpu, cpus[1]);
    EXPECT_TRUE(second.mask_holds);
  }
  sched_setaffinity(0, sizeof(allowed), &allowed);
}
#endif

TEST(JobThreads, NeedsAThread) {
  EXPECT_THAT(
      [] { JobThreads none(0); },
      ThrowsMessage<weft::Error>(HasSubstr("[job threads] need at least one thread, got 0")));
}

}  // namespace
}  // namespace weft
