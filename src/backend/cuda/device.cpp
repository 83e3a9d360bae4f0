// The CUDA device seam: device discovery, the library's stream, raw device memory for the
// caching pool (cudaMalloc, never managed memory: the pool in src/tensor/allocator.cpp keeps
// freed blocks by size class, so steady-state training does not call cudaMalloc), copies
// between host and device, and the pinned staging ring behind upload().
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "../device_memory.h"
#include "cuda_context.h"
#include "weft/backend/counters.h"
#include "weft/backend/cuda.h"
#include "weft/core/error.h"

namespace weft {
namespace {

struct DeviceInfo {
  int count = 0;
  std::string reason;  // why count is 0
};

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    DeviceInfo i;
    const cudaError_t status = cudaGetDeviceCount(&i.count);
    if (status != cudaSuccess) {
      cudaGetLastError();  // not sticky, but leave no error behind for later checks
      i.count = 0;
      i.reason = cudaGetErrorString(status);
    } else if (i.count == 0) {
      i.reason = "the driver reports no CUDA device";
    }
    return i;
  }();
  return info;
}

void require_device(const char* what) {
  if (!cuda_available())
    fail(what, "no CUDA device is usable (", device_info().reason,
         "); keep tensors on Device::kCpu, or run where cuda_available() is true");
}

}  // namespace

bool cuda_built() { return true; }
bool cuda_available() { return device_info().count > 0; }
int cuda_device_count() { return device_info().count; }
std::string cuda_unavailable_reason() { return device_info().reason; }

std::string cuda_device_name(int device) {
  if (device < 0 || device >= cuda_device_count())
    fail("cuda", "device ", device, " does not exist: ", cuda_device_count(), " device(s)",
         cuda_available() ? "" : " (" + cuda_unavailable_reason() + ")");
  cudaDeviceProp prop{};
  backend::cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  const double gib = double(prop.totalGlobalMem) / double(1ull << 30);
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB", gib);
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + memory + ")";
}

void cuda_synchronize() {
  if (!cuda_available()) return;
  ++backend::detail::thread_counters().synchronizations;
  backend::cuda::check(cudaStreamSynchronize(backend::cuda::stream()), "synchronize");
}

namespace backend {
namespace cuda {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("cuda", what, ": ", cudaGetErrorString(status));
}

void check_launch(const char* kernel) {
  ++backend::detail::thread_counters().launches;
  check(cudaGetLastError(), kernel);
}

cudaStream_t stream() {
  static cudaStream_t s = [] {
    require_device("cuda");
    cudaStream_t created = nullptr;
    check(cudaSetDevice(0), "cudaSetDevice(0)");
    check(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking), "cudaStreamCreate");
    return created;
  }();
  return s;
}

namespace {

// A ring of pinned host memory: each upload copies its bytes in, queues the copy to the
// device and records an event; a region is written again only after its event has passed.
// The host waits only when the ring wraps onto copies the device has not done yet, or once
// when an upload larger than the ring (a batch's packed buffer, loom/batch_plan.h) makes it
// grow: it then holds twice that, so a run of such batches keeps two in flight.
class StagingRing {
 public:
  static constexpr std::size_t kInitialCapacity = std::size_t(8) << 20;
  static constexpr std::size_t kMaxCapacity = std::size_t(1) << 30;

  bool fits(std::size_t bytes) const { return bytes <= kMaxCapacity / 2; }

  void copy_to_device(void* dst, const void* src, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    if (bytes > capacity_) grow(bytes);
    if (!host_) check(cudaHostAlloc(&host_, capacity_, cudaHostAllocDefault), "cudaHostAlloc");
    retire_finished();
    if (head_ + bytes > capacity_) head_ = 0;
    while (!pending_.empty() && overlaps(pending_.front(), head_, bytes)) wait_oldest();
    char* slot = static_cast<char*>(host_) + head_;
    std::memcpy(slot, src, bytes);
    check(cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, stream()), "upload");
    Region region{head_, head_ + bytes, next_event()};
    check(cudaEventRecord(region.event, stream()), "cudaEventRecord");
    pending_.push_back(region);
    head_ += (bytes + 255) / 256 * 256;
  }

 private:
  struct Region {
    std::size_t start, end;
    cudaEvent_t event;
  };
  static bool overlaps(const Region& r, std::size_t start, std::size_t bytes) {
    return r.start < start + bytes && start < r.end;
  }
  void wait_oldest() {
    ++backend::detail::thread_counters().synchronizations;
    check(cudaEventSynchronize(pending_.front().event), "staging wait");
    events_.push_back(pending_.front().event);
    pending_.pop_front();
  }
  // Replaces the ring by one of twice `bytes` once every copy out of it is done.
  void grow(std::size_t bytes) {
    while (!pending_.empty()) wait_oldest();
    if (host_) check(cudaFreeHost(host_), "cudaFreeHost");
    host_ = nullptr;
    capacity_ = std::min(kMaxCapacity, 2 * bytes);
    head_ = 0;
  }
  void retire_finished() {
    while (!pending_.empty() && cudaEventQuery(pending_.front().event) == cudaSuccess) {
      events_.push_back(pending_.front().event);
      pending_.pop_front();
    }
    cudaGetLastError();  // cudaErrorNotReady from the query is not a failure
  }
  cudaEvent_t next_event() {
    if (!events_.empty()) {
      cudaEvent_t e = events_.back();
      events_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    return e;
  }

  std::mutex mutex_;
  void* host_ = nullptr;
  std::size_t capacity_ = kInitialCapacity;
  std::size_t head_ = 0;
  std::deque<Region> pending_;
  std::vector<cudaEvent_t> events_;
};

StagingRing& staging() {
  static StagingRing* ring = new StagingRing;  // never destroyed: used until exit
  return *ring;
}

// Host-to-device copy that returns without waiting: copies through the staging ring (up to
// half a GiB); larger ones from pageable memory, which CUDA stages itself (it may block the host
// for the staging, never for kernels queued earlier to finish).
void copy_from_host(void* dst, const void* src, std::size_t bytes) {
  ++backend::detail::thread_counters().host_to_device;
  if (staging().fits(bytes)) {
    staging().copy_to_device(dst, src, bytes);
    return;
  }
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()), "host-to-device copy");
}

}  // namespace

Tensor upload(const void* host, std::size_t bytes) {
  Tensor out = Tensor::empty(Shape{std::int64_t((bytes + 3) / 4)}, DType::kInt32, Device::kCuda);
  if (bytes > 0) copy_from_host(out.raw_data(), host, bytes);
  return out;
}

}  // namespace cuda

void* device_allocate(Device device, std::size_t bytes) {
  WEFT_ASSERT(device == Device::kCuda);
  require_device("cuda allocate");
  cuda::stream();  // selects the device the stream lives on before the first allocation
  void* pointer = nullptr;
  const cudaError_t status = cudaMalloc(&pointer, std::max<std::size_t>(bytes, 1));
  if (status != cudaSuccess) {
    cudaGetLastError();
    fail("cuda allocate", "cudaMalloc of ", bytes, " bytes failed (", cudaGetErrorString(status),
         "); weft::allocator_stats(Device::kCuda) shows what the pool holds, and "
         "weft::release_cached_memory(Device::kCuda) returns its cached blocks");
  }
  return pointer;
}

void device_free(Device device, void* pointer) {
  WEFT_ASSERT(device == Device::kCuda);
  ++detail::thread_counters().synchronizations;  // cudaFree waits for the device
  cuda::check(cudaFree(pointer), "cudaFree");
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::kCpu && src_device == Device::kCpu) {
    std::memcpy(dst, src, bytes);
  } else if (dst_device == Device::kCuda && src_device == Device::kCpu) {
    cuda::copy_from_host(dst, src, bytes);
  } else if (dst_device == Device::kCuda) {
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda::stream()),
                "device-to-device copy");
  } else {
    // A read-back: the one place the host waits, since the caller uses the bytes next.
    ++detail::thread_counters().synchronizations;
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cuda::stream()),
                "device-to-host copy");
    cuda::check(cudaStreamSynchronize(cuda::stream()), "device-to-host copy (synchronize)");
  }
}

}  // namespace backend
}  // namespace weft
