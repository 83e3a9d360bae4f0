# Warnings, sanitizers and CPU tuning shared by every Weft target (through weft_project_options).
# The GCC-style flags apply to C++ sources; CUDA sources (src/backend/cuda/*.cu) get nvcc's
# own warning switches and pass the host compiler's warnings through -Xcompiler.
add_library(weft_project_options INTERFACE)
set(weft_cxx "$<COMPILE_LANGUAGE:CXX>")
set(weft_cuda "$<COMPILE_LANGUAGE:CUDA>")
target_compile_options(weft_project_options INTERFACE
                       "$<${weft_cxx}:-Wall;-Wextra;-Wpedantic;-Wshadow;-Wnon-virtual-dtor;-Wno-unused-parameter>"
                       "$<${weft_cuda}:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>")
if(WEFT_WERROR)
  target_compile_options(weft_project_options INTERFACE "$<${weft_cxx}:-Werror>"
                                                         "$<${weft_cuda}:-Werror=all-warnings>")
endif()
if(WEFT_NATIVE_ARCH)
  target_compile_options(weft_project_options INTERFACE "$<${weft_cxx}:-march=native>")
endif()
if(WEFT_SANITIZE)
  target_compile_options(weft_project_options INTERFACE
                         "$<${weft_cxx}:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  target_link_options(weft_project_options INTERFACE -fsanitize=address,undefined)
endif()
if(WEFT_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "WEFT_BUILD_FUZZERS needs clang (libFuzzer); configure with "
                        "-DCMAKE_CXX_COMPILER=clang++-14, not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  # Coverage feedback for the fuzzers from every library the inputs pass through.
  target_compile_options(weft_project_options INTERFACE "$<${weft_cxx}:-fsanitize=fuzzer-no-link>")
endif()
# clang 14 fails on coroutines compiled with UBSan and the fuzzers' coverage together ("Cannot
# represent a difference across sections"), so in the fuzz build the sources that define
# coroutines (the flow programs) keep ASan and UBSan but give no coverage feedback. Call it from
# the CMakeLists.txt of the sources' own folder (source properties are per folder).
function(weft_without_fuzzer_coverage)
  if(WEFT_BUILD_FUZZERS)
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS "-fno-sanitize=fuzzer-no-link")
  endif()
endfunction()
