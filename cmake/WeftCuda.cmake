# The CUDA backend switch. WEFT_WITH_CUDA = OFF (the default: the no-CUDA stubs), ON (the CUDA
# backend, or a configure error saying what is missing) or AUTO (the backend when CMake's CUDA
# language and the CUDA toolkit are both found, else the stubs). Sets WEFT_HAVE_CUDA.
set(WEFT_HAVE_CUDA OFF)
string(TOUPPER "${WEFT_WITH_CUDA}" weft_cuda_mode)
if(weft_cuda_mode MATCHES "^(ON|TRUE|YES|Y|1)$")
  set(weft_cuda_mode ON)
elseif(weft_cuda_mode MATCHES "^(OFF|FALSE|NO|N|0|)$")
  set(weft_cuda_mode OFF)
elseif(NOT weft_cuda_mode STREQUAL "AUTO")
  message(FATAL_ERROR "weft: WEFT_WITH_CUDA is '${WEFT_WITH_CUDA}'; expected OFF, ON or AUTO")
endif()

if(NOT weft_cuda_mode STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  set(weft_cuda_missing "")
  if(NOT CMAKE_CUDA_COMPILER)
    string(CONCAT weft_cuda_missing "no CUDA compiler (nvcc) was found; put it on PATH or "
                  "pass -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc")
  else()
    find_package(CUDAToolkit QUIET)
    if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cublas)
      string(CONCAT weft_cuda_missing "the CUDA toolkit (cudart, cuBLAS) was not found next "
                    "to ${CMAKE_CUDA_COMPILER}")
    endif()
  endif()
  if(weft_cuda_missing STREQUAL "")
    set(WEFT_HAVE_CUDA ON)
  elseif(weft_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "weft: WEFT_WITH_CUDA=ON but ${weft_cuda_missing}. Configure with "
                        "-DWEFT_WITH_CUDA=OFF (or AUTO) to build without the CUDA backend.")
  else()
    message(STATUS "weft: CUDA backend off (WEFT_WITH_CUDA=AUTO): ${weft_cuda_missing}")
  endif()
endif()

if(WEFT_HAVE_CUDA)
  # Ampere (A100, sm_80) and Hopper (H100, sm_90) unless the builder names others; each
  # architecture adds to nvcc's compile time, so the default list is kept short.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  # libweft requires cxx_std_20, which CMake also applies to its CUDA sources; CMake 3.25 does
  # not know nvcc's flag for it (nvcc 12+ accepts -std=c++20), so it is named here.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  message(STATUS "weft: CUDA backend on (CUDA ${CUDAToolkit_VERSION}, architectures "
                 "${CMAKE_CUDA_ARCHITECTURES})")
endif()
