# Decides whether Weft's distributed layer (weft/dist) runs over MPI. WEFT_WITH_MPI: OFF (one
# process only), ON (MPI required: Debian's libopenmpi-dev), AUTO (MPI when found). Sets
# WEFT_HAVE_MPI; src/CMakeLists.txt picks the MPI or the single-process world() from it.
set(WEFT_WITH_MPI AUTO CACHE STRING "Distributed training over MPI: OFF, ON or AUTO")
set_property(CACHE WEFT_WITH_MPI PROPERTY STRINGS OFF ON AUTO)
set(WEFT_HAVE_MPI OFF)
if(NOT WEFT_WITH_MPI STREQUAL "OFF")
  # MPI's C API through the C++ compiler (the project enables C++ only), without the
  # deprecated C++ bindings.
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(WEFT_HAVE_MPI ON)
    find_program(WEFT_MPIEXEC NAMES mpirun mpiexec)
  elseif(WEFT_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "WEFT_WITH_MPI=ON but MPI was not found (apt-get install libopenmpi-dev "
                        "openmpi-bin)")
  else()
    message(STATUS "weft: MPI not found; distributed training is single-process only")
  endif()
endif()
