// The denormal mode (weft/core/denormals.h): the process's setting, read once from
// WEFT_DENORMALS, and the per-architecture control register bits that apply it to a thread.
#include "weft/core/denormals.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "weft/core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace weft {
namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr unsigned long kFlushBits = 0x8040;  // MXCSR: FTZ (bit 15) and DAZ (bit 6)
unsigned long read_control() { return _mm_getcsr(); }
void write_control(unsigned long bits) { _mm_setcsr(static_cast<unsigned>(bits)); }
constexpr bool kSupported = true;
#elif defined(__aarch64__)
constexpr unsigned long kFlushBits = 1ul << 24;  // FPCR.FZ: inputs and results
unsigned long read_control() {
  unsigned long bits = 0;
  __asm__ volatile("mrs %0, fpcr" : "=r"(bits));
  return bits;
}
void write_control(unsigned long bits) { __asm__ volatile("msr fpcr, %0" : : "r"(bits)); }
constexpr bool kSupported = true;
#else
constexpr unsigned long kFlushBits = 0;
unsigned long read_control() { return 0; }
void write_control(unsigned long) {}
constexpr bool kSupported = false;
#endif

// 0: not read yet; otherwise 1 + the DenormalMode; kBadEnvironment: WEFT_DENORMALS is wrong.
constexpr int kUnread = 0;
constexpr int kBadEnvironment = 3;
std::atomic<int> g_state{kUnread};
// Where the setting came from: an index into kSources.
constexpr const char* kSources[] = {"default", "WEFT_DENORMALS", "set_denormal_mode"};
std::atomic<int> g_source{0};
std::string g_bad_value;  // written once, under g_init
std::once_flag g_init;

void read_environment() {
  const char* value = std::getenv("WEFT_DENORMALS");
  if (value == nullptr || *value == '\0') {
    g_state.store(1 + int(DenormalMode::kFlush));
    return;
  }
  try {
    const DenormalMode mode = parse_denormal_mode(value);
    g_source.store(1);
    g_state.store(1 + int(mode));
  } catch (const Error&) {
    g_bad_value = value;
    g_state.store(kBadEnvironment);
  }
}

DenormalMode current_mode() {
  int state = g_state.load(std::memory_order_acquire);
  if (state == kUnread) {
    std::call_once(g_init, read_environment);
    state = g_state.load(std::memory_order_acquire);
  }
  if (state == kBadEnvironment)
    fail("denormals", "WEFT_DENORMALS='", g_bad_value, "' is neither 'flush' nor 'keep'");
  return DenormalMode(state - 1);
}

}  // namespace

DenormalMode denormal_mode() { return current_mode(); }

void set_denormal_mode(DenormalMode mode) {
  std::call_once(g_init, [] {});  // the environment is not read after an explicit setting
  g_source.store(2);
  g_state.store(1 + int(mode), std::memory_order_release);
}

std::string_view denormal_mode_source() {
  current_mode();
  return kSources[g_source.load()];
}

bool denormal_control_supported() { return kSupported; }

bool thread_flushes_denormals() {
  return kSupported && (read_control() & kFlushBits) == kFlushBits;
}

DenormalScope::DenormalScope() {
  if (current_mode() != DenormalMode::kFlush) return;
  saved_ = read_control();
  if ((saved_ & kFlushBits) != kFlushBits) {
    write_control(saved_ | kFlushBits);
    restore_ = true;
  }
}

DenormalScope::~DenormalScope() {
  if (restore_) write_control(saved_);
}

void apply_denormal_mode_to_this_thread() {
  if (current_mode() == DenormalMode::kFlush) write_control(read_control() | kFlushBits);
}

}  // namespace weft
