// Fibers on ucontext stacks (fiber.h). A stack is reserved, not committed (only the pages a
// weave touches cost memory), with a guard region below it so an overflow faults instead of
// writing over a neighbour; freed stacks are kept for the next batch on this thread.
// AddressSanitizer is told of every switch (its fiber interface), or it would take the other
// stack's frames for overflows.
#include "fiber.h"

#include <sys/mman.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "weft/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_FIBER_ASAN 1
#endif
#endif
#ifdef WEFT_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace weft::blocks::detail {
namespace {

// As deep as a thread's default stack: a ForwardDeclaration recursion over a deep tree weaves
// in a fiber as it would on the calling thread.
constexpr std::size_t kStackBytes = std::size_t(8) << 20;
constexpr std::size_t kGuardBytes = std::size_t(64) << 10;
constexpr std::size_t kPooledStacks = 64;

// Thrown by suspend() in a fiber being destroyed: unwinds the body's frames.
struct Cancelled {};

struct StackPool {
  std::vector<void*> free;
  ~StackPool() {
    for (void* stack : free) munmap(stack, kStackBytes + kGuardBytes);
  }
};
thread_local StackPool stack_pool;

void* take_stack() {
  if (!stack_pool.free.empty()) {
    void* stack = stack_pool.free.back();
    stack_pool.free.pop_back();
    return stack;
  }
  void* stack = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED)
    fail("blocks", "cannot reserve a weave stack of ", kStackBytes >> 20,
         " MiB for a flow example (too many examples in one batch for the address space?)");
  mprotect(stack, kGuardBytes, PROT_NONE);
  return stack;
}

void give_back(void* stack) {
#ifdef WEFT_FIBER_ASAN
  // The last frames' redzones stay poisoned (the fiber left them by a switch, not by returning).
  ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(stack) + kGuardBytes, kStackBytes);
#endif
  if (stack_pool.free.size() < kPooledStacks)
    stack_pool.free.push_back(stack);
  else
    munmap(stack, kStackBytes + kGuardBytes);
}

}  // namespace

Fiber::Fiber(std::function<void()> body) : body_(std::move(body)), stack_(take_stack()) {
  getcontext(&self_);
  self_.uc_stack.ss_sp = static_cast<char*>(stack_) + kGuardBytes;
  self_.uc_stack.ss_size = kStackBytes;
  self_.uc_link = nullptr;
  const auto address = reinterpret_cast<std::uintptr_t>(this);
  // makecontext passes int-sized arguments: the pointer goes in two halves.
  makecontext(&self_, reinterpret_cast<void (*)()>(&Fiber::entry), 2, unsigned(address),
              unsigned(address >> 32));
}

Fiber::~Fiber() {
  if (started_ && !finished_) {
    cancelled_ = true;
    while (!finished_) switch_in();
  }
  give_back(stack_);
}

bool Fiber::resume() {
  if (finished_) return true;
  started_ = true;
  switch_in();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return finished_;
}

void Fiber::suspend() {
  switch_out(false);
  if (cancelled_) throw Cancelled{};
}

void Fiber::entry(unsigned low, unsigned high) {
  auto* fiber = reinterpret_cast<Fiber*>(std::uintptr_t(low) | (std::uintptr_t(high) << 32));
#ifdef WEFT_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &fiber->caller_bottom_, &fiber->caller_size_);
#endif
  try {
    fiber->body_();
  } catch (const Cancelled&) {
  } catch (...) {
    fiber->error_ = std::current_exception();
  }
  fiber->finished_ = true;
  fiber->switch_out(true);
}

void Fiber::switch_in() {
#ifdef WEFT_FIBER_ASAN
  void* caller_fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&caller_fake_stack, static_cast<char*>(stack_) + kGuardBytes,
                                 kStackBytes);
#endif
  swapcontext(&caller_, &self_);
#ifdef WEFT_FIBER_ASAN
  __sanitizer_finish_switch_fiber(caller_fake_stack, nullptr, nullptr);
#endif
}

void Fiber::switch_out(bool last) {
#ifdef WEFT_FIBER_ASAN
  // A fiber leaving for the last time gives its fake stack up (nullptr).
  __sanitizer_start_switch_fiber(last ? nullptr : &fake_stack_, caller_bottom_, caller_size_);
#else
  (void)last;
#endif
  swapcontext(&self_, &caller_);
#ifdef WEFT_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_, &caller_bottom_, &caller_size_);
#endif
}

}  // namespace weft::blocks::detail
