// A piece of work that a helper thread may do ahead of time (weaving the next batch while this
// one runs), done instead by the thread that wants its result when no helper has begun it yet:
// on a busy machine a helper may start late, and waiting for it would make the work cost more
// than doing it in turn. Whoever claims it first does it; take() waits only for work begun.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>

namespace weft {

template <typename T>
class ClaimableTask {
 public:
  explicit ClaimableTask(std::function<T()> work) : work_(std::move(work)) {}

  // Does the work unless another thread has claimed it; a failure is kept for take().
  void run_if_unclaimed() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (claimed_) return;
      claimed_ = true;
    }
    std::optional<T> result;
    std::exception_ptr failure;
    try {
      result.emplace(work_());
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(result);
    error_ = failure;
    done_ = true;
    done_changed_.notify_all();
  }

  // The result, done here if nobody has claimed the work; rethrows the work's failure. Once.
  T take() {
    run_if_unclaimed();
    std::unique_lock<std::mutex> lock(mutex_);
    done_changed_.wait(lock, [&] { return done_; });
    if (error_) std::rethrow_exception(error_);
    return std::move(*result_);
  }

 private:
  std::function<T()> work_;
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool claimed_ = false;
  bool done_ = false;
  std::optional<T> result_;
  std::exception_ptr error_;
};

}  // namespace weft
