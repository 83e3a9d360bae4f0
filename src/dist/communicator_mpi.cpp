// The communicator over MPI (built with WEFT_WITH_MPI): MPI's world, initialised on first use
// when the process was started by mpirun and finalised at exit. Every collective is started
// non-blocking and polled against the deadline, so a dead or stuck rank ends the job with a
// message instead of a hang.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "weft/core/error.h"
#include "weft/dist/communicator.h"

namespace weft::dist {
namespace {

bool launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value) return true;
  }
  return false;
}

class MpiWorld final : public Communicator {
 public:
  MpiWorld() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      owns_mpi_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    host_ = host;
  }
  ~MpiWorld() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_mpi_ && !finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }

  void barrier() override {
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    wait(request, "barrier");
  }

  void broadcast(std::span<std::byte> data, int root) override {
    if (root < 0 || root >= size_) fail("dist", "broadcast from rank ", root, " of ", size_);
    MPI_Request request;
    MPI_Ibcast(data.data(), count(data.size()), MPI_BYTE, root, MPI_COMM_WORLD, &request);
    wait(request, "broadcast");
  }

  void all_reduce_sum(std::span<float> data) override {
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, data.data(), count(data.size()), MPI_FLOAT, MPI_SUM,
                   MPI_COMM_WORLD, &request);
    wait(request, "all-reduce");
  }

  void all_reduce_sum(std::span<double> data) override {
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, data.data(), count(data.size()), MPI_DOUBLE, MPI_SUM,
                   MPI_COMM_WORLD, &request);
    wait(request, "all-reduce");
  }

  std::vector<std::string> all_gather(std::string_view bytes) override {
    int mine = count(bytes.size());
    std::vector<int> sizes(std::size_t(size_), 0);
    MPI_Request request;
    MPI_Iallgather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD, &request);
    wait(request, "all-gather (sizes)");
    std::vector<int> offsets(std::size_t(size_), 0);
    long long total = 0;
    for (int r = 0; r < size_; ++r) {
      offsets[std::size_t(r)] = int(total);
      total += sizes[std::size_t(r)];
    }
    if (total > (1ll << 31) - 1) fail("dist", "all-gather of ", total, " bytes is too large");
    std::string all(std::size_t(total), '\0');
    MPI_Iallgatherv(bytes.data(), mine, MPI_BYTE, all.data(), sizes.data(), offsets.data(),
                    MPI_BYTE, MPI_COMM_WORLD, &request);
    wait(request, "all-gather");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) {
      out.push_back(
          all.substr(std::size_t(offsets[std::size_t(r)]), std::size_t(sizes[std::size_t(r)])));
    }
    return out;
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  std::string describe() const override {
    return "MPI, rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " on " + host_;
  }

 private:
  static int count(std::size_t n) {
    if (n > std::size_t((1u << 31) - 1)) fail("dist", "a message of ", n, " elements is too large");
    return int(n);
  }

  // Polls the request until it completes or the deadline passes; then aborts the job. OpenMPI
  // moves a non-blocking collective forward only inside MPI calls, so the first second polls
  // without pause, as MPI_Wait would; a wait that long is a straggler, polled every ms.
  void wait(MPI_Request& request, const char* operation) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::duration<double>(collective_timeout());
    const auto patience = start + std::chrono::seconds(1);
    for (;;) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) return;
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr,
                     "weft: error: [dist] rank %d of %d: %s waited more than %.0f s for the other "
                     "ranks (one has died or stopped); ending the job\n",
                     rank_, size_, operation, collective_timeout());
        abort(3);
      }
      if (std::chrono::steady_clock::now() > patience) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      } else {
        std::this_thread::yield();
      }
    }
  }

  int rank_ = 0, size_ = 1, local_size_ = 1;
  bool owns_mpi_ = false;
  std::string host_;
};

}  // namespace

bool built_with_mpi() { return true; }

Communicator& world() {
  static std::unique_ptr<Communicator> instance =
      launched_by_mpirun() ? std::unique_ptr<Communicator>(std::make_unique<MpiWorld>())
                           : single_process();
  return *instance;
}

}  // namespace weft::dist
