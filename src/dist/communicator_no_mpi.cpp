// world() in a build without MPI (WEFT_WITH_MPI=OFF or MPI not found): always one process, and
// a clear error when mpirun started this program anyway.
#include <cstdlib>

#include "weft/core/error.h"
#include "weft/dist/communicator.h"

namespace weft::dist {

bool built_with_mpi() { return false; }

Communicator& world() {
  static std::unique_ptr<Communicator> instance = [] {
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (size == nullptr) size = std::getenv("PMI_SIZE");
    if (size != nullptr && std::atoi(size) > 1) {
      fail("dist", "started by mpirun with ", size,
           " processes, but this Weft was built without MPI (install libopenmpi-dev and "
           "rebuild with -DWEFT_WITH_MPI=ON)");
    }
    return single_process();
  }();
  return *instance;
}

}  // namespace weft::dist
