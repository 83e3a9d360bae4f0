// A piece of work run on a stack of its own, so it can stop in the middle of deep calls and go
// on later where it stopped. The flow path (flow_run.cpp) weaves each example in one: a Loop
// reading a value not computed yet suspends the weave with every block's frame kept, instead of
// unwinding it and weaving the example again from its start.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>

#include <ucontext.h>

namespace weft::blocks::detail {

class Fiber {
 public:
  explicit Fiber(std::function<void()> body);
  // A fiber suspended in its body is ended first: suspend() throws there (not a std::exception,
  // so the blocks' error wrappers let it pass) and the body's frames unwind.
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Runs the body until it suspends or returns; true once it has returned. An exception that
  // left the body is thrown here.
  bool resume();
  // Called by the body: back to the resume() that ran it, until the next resume().
  void suspend();
  bool finished() const { return finished_; }

 private:
  static void entry(unsigned low, unsigned high);
  void switch_in();
  void switch_out(bool last);

  std::function<void()> body_;
  ucontext_t self_{}, caller_{};
  void* stack_ = nullptr;
  bool started_ = false, finished_ = false, cancelled_ = false;
  std::exception_ptr error_;
  // AddressSanitizer's view of the stacks (unused without it).
  [[maybe_unused]] void* fake_stack_ = nullptr;
  [[maybe_unused]] const void* caller_bottom_ = nullptr;
  [[maybe_unused]] std::size_t caller_size_ = 0;
};

}  // namespace weft::blocks::detail
