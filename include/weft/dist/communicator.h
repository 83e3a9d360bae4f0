// Processes working together on one job: a communicator over MPI's world when the program was
// started by mpirun (and Weft was built with MPI, WEFT_WITH_MPI), or a single process otherwise,
// with the collectives data-parallel training needs: broadcast, all-reduce of flat buffers,
// all-gather of bytes, barrier. Every collective has a deadline (collective_timeout): a rank
// that died or stopped answering ends the job with a message naming the operation, never a hang.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/export.h"

WEFT_API_BEGIN
namespace weft::dist {

// Whether this build has MPI (WEFT_WITH_MPI); without it, world() is always one process.
bool built_with_mpi();

class Communicator {
 public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // How many of the ranks (this one included) share this rank's machine.
  virtual int local_size() const = 0;
  bool is_root() const { return rank() == 0; }

  virtual void barrier() = 0;
  // Replaces `data` on every rank with root's (the same byte count on every rank).
  virtual void broadcast(std::span<std::byte> data, int root = 0) = 0;
  // Element-wise sums over the ranks, in place (the same length on every rank).
  virtual void all_reduce_sum(std::span<float> data) = 0;
  virtual void all_reduce_sum(std::span<double> data) = 0;
  // Every rank's bytes, in rank order (any length per rank).
  virtual std::vector<std::string> all_gather(std::string_view bytes) = 0;
  // Ends every process of the job at once (after the caller printed why).
  [[noreturn]] virtual void abort(int code) = 0;
  // "single process" or "MPI, rank 1 of 4 on host".
  virtual std::string describe() const = 0;
};

// The job's communicator. Under mpirun (OMPI_COMM_WORLD_SIZE or PMI_SIZE set) with MPI built
// in, MPI is initialised on first use and finalised at exit; otherwise a single process.
// Throws weft::Error when started by mpirun but built without MPI.
Communicator& world();
// A communicator of this process alone (rank 0 of 1), whatever the launch.
std::unique_ptr<Communicator> single_process();

// How long a collective may wait for the other ranks (seconds; default 600, or the
// WEFT_DIST_TIMEOUT environment variable) before the job is aborted with a message.
void set_collective_timeout(double seconds);
double collective_timeout();

// Sums a list of float buffers over the ranks in buckets of about `bucket_bytes` (a buffer is
// never split; a large one is a bucket of its own), so that many small gradients travel in a
// few messages and a large model never needs one flat copy of all its gradients. The gradients
// of data-parallel training go through this, after backward (not overlapped with it).
void all_reduce_buckets(Communicator& communicator, std::span<const std::span<float>> buffers,
                        std::size_t bucket_bytes = std::size_t(1) << 22);

// Sums a row-major [rows, cols] float matrix over the ranks, in place, when each rank's copy is
// zero outside a few rows: an embedding table's gradient, nonzero only in the rows of the words
// its batch used. The ranks agree on the union of their nonzero rows (one all-reduce of a row
// mask, a float per row) and sum only those rows, packed; a row zero on every rank stays zero,
// so the result equals all_reduce_sum over the whole matrix. When the union holds more than
// half the rows, the whole matrix is summed instead. Each rank's matrix is first multiplied by
// its `scale` (its weight in a mean), during the packing. Returns the number of rows summed.
std::size_t all_reduce_sparse_rows(Communicator& communicator, std::span<float> matrix,
                                   std::size_t cols, float scale = 1.f);

}  // namespace weft::dist
WEFT_API_END
