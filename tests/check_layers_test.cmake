# The layering check catches what it is for (cmake -P, with WEFT_SOURCE_DIR and WORK_DIR set):
# on a copy of the checked folders it passes, then fails naming file:line for a wrong-way
# include (core including models) and for another layer's private header (nn including the
# loom's chunk_ops.h). Run from another directory, as the build runs it.
set(copy ${WORK_DIR}/tree)
file(REMOVE_RECURSE ${copy})
foreach(dir include src bench/treelstm tools examples)
  get_filename_component(parent ${copy}/${dir} DIRECTORY)
  file(COPY ${WEFT_SOURCE_DIR}/${dir} DESTINATION ${parent})
endforeach()

function(run_check out_rc out_text)
  execute_process(COMMAND ${CMAKE_COMMAND} -DWEFT_SOURCE_DIR=${copy}
                          -DWEFT_STAMP=${WORK_DIR}/stamp -P
                          ${WEFT_SOURCE_DIR}/cmake/check_layers.cmake
                  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE text
                  ERROR_VARIABLE text)
  set(${out_rc} ${rc} PARENT_SCOPE)
  set(${out_text} "${text}" PARENT_SCOPE)
endfunction()

run_check(rc text)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the layering check fails on the clean tree:\n${text}")
endif()

file(READ ${copy}/src/core/rng.cpp rng)
file(WRITE ${copy}/src/core/rng.cpp "#include \"weft/models/registry.h\"\n${rng}")
file(READ ${copy}/src/nn/fc.cpp fc)
file(WRITE ${copy}/src/nn/fc.cpp "${fc}#include \"../loom/chunk_ops.h\"\n")
string(REGEX MATCHALL "\n" fc_lines "${fc}")
list(LENGTH fc_lines fc_last)
math(EXPR fc_line "${fc_last} + 1")
run_check(rc text)
if(rc EQUAL 0)
  message(FATAL_ERROR "the layering check passes two broken includes:\n${text}")
endif()
foreach(expected IN ITEMS
        "src/core/rng.cpp:1: error: [layering] #include \"weft/models/registry.h\": a wrong-way include: layer 'core' may use only core, not 'models'"
        "src/nn/fc.cpp:${fc_line}: error: [layering] #include \"../loom/chunk_ops.h\": layer 'nn' includes a private header of layer 'loom'")
  string(FIND "${text}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the layering check does not report\n  ${expected}\nit said:\n${text}")
  endif()
endforeach()
file(REMOVE_RECURSE ${copy})
message(STATUS "the layering check reports both broken includes")
