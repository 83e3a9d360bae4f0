// The all-reduce of data-parallel training, timed: run under mpirun with K ranks, it sums
// gradient-sized float buffers with dist::all_reduce_buckets (the Trainer's path) and prints,
// on rank 0, the mean and best milliseconds per all-reduce at each size, and the bandwidth that
// implies (ring all-reduce moves 2 (K-1)/K of the buffer per rank).
//   mpirun -np 2 --oversubscribe build/release/bench/weft_bench_allreduce 2432000 6300000
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "weft/dist/communicator.h"

int main(int argc, char** argv) {
  weft::dist::Communicator& world = weft::dist::world();
  std::vector<long> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atol(argv[i]));
  if (sizes.empty()) sizes = {1000, 100000, 2432000};
  if (world.is_root()) fmt::print("{}\nfloats,mean_ms,best_ms,GB_per_s\n", world.describe());
  for (long n : sizes) {
    std::vector<float> buffer(std::size_t(n), 1.f);
    std::vector<std::span<float>> views{std::span<float>(buffer)};
    const int repeats = 20;
    double total = 0, best = 1e30;
    for (int r = 0; r < repeats + 2; ++r) {
      world.barrier();
      const auto start = std::chrono::steady_clock::now();
      if (std::getenv("WEFT_BENCH_DIRECT")) {
        world.all_reduce_sum(std::span<float>(buffer));
      } else {
        weft::dist::all_reduce_buckets(world, views);
      }
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      if (r < 2) continue;  // warm-up
      total += ms;
      best = std::min(best, ms);
    }
    const double k = world.size();
    const double bytes = 2 * (k - 1) / k * double(n) * 4;
    if (world.is_root()) {
      fmt::print("{},{:.3f},{:.3f},{:.2f}\n", n, total / repeats, best, bytes / (best * 1e6));
    }
  }
  return 0;
}
