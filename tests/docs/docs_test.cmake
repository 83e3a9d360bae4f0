# The documentation test (tests/docs/check_docs.py; its conventions are in docs/README.md): the
# C++ blocks of README.md and docs/*.md compiled here as part of the build (with Weft's warnings
# and sanitizer flags, linked to weft::weft as the examples are), and ctest tests that check
# every fence, run the C++ programs and run the shell commands against this build. The Python
# blocks are the test docs_blocks_python (python/CMakeLists.txt, beside python_tests).
set(weft_docs_script ${CMAKE_CURRENT_LIST_DIR}/check_docs.py)
set(weft_docs_dir ${CMAKE_CURRENT_BINARY_DIR}/docs)
file(GLOB weft_doc_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
# Editing a page or the script reconfigures: the C++ blocks are targets of their own.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/README.md
                                                               ${weft_doc_pages} ${weft_docs_script})
execute_process(COMMAND ${Python3_EXECUTABLE} ${weft_docs_script} extract-cpp ${weft_docs_dir}
                        --root ${PROJECT_SOURCE_DIR}
                RESULT_VARIABLE weft_docs_failed)
if(weft_docs_failed)
  message(FATAL_ERROR "tests/docs/check_docs.py could not extract the documentation's C++ blocks")
endif()
include(${weft_docs_dir}/blocks.cmake)
foreach(entry IN LISTS WEFT_DOC_CPP_BLOCKS)
  separate_arguments(fields UNIX_COMMAND "${entry}")
  list(GET fields 0 name)
  list(GET fields 1 has_main)
  if(has_main)
    add_executable(${name} ${weft_docs_dir}/${name}.cpp)
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${weft_docs_dir}/bin)
  else()
    add_library(${name} OBJECT ${weft_docs_dir}/${name}.cpp)
  endif()
  target_link_libraries(${name} PRIVATE weft::weft $<BUILD_INTERFACE:weft_project_options>)
endforeach()

add_test(NAME docs_blocks_cpp
         COMMAND ${Python3_EXECUTABLE} ${weft_docs_script} cpp ${weft_docs_dir}/bin
                 --root ${PROJECT_SOURCE_DIR})
set_tests_properties(docs_blocks_cpp PROPERTIES LABELS docs TIMEOUT 300)
if(TARGET weft_cli)
  add_test(NAME docs_blocks_shell
           COMMAND ${Python3_EXECUTABLE} ${weft_docs_script} sh --build ${CMAKE_BINARY_DIR}
                   --root ${PROJECT_SOURCE_DIR})
  set_tests_properties(docs_blocks_shell PROPERTIES LABELS docs TIMEOUT 300 COST 13)
endif()
# The test itself catches malformed fences, drifted excerpts and failing blocks (made-up pages).
add_test(NAME docs_check_catches_violations
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_docs_test.py
                 ${weft_docs_script})
set_tests_properties(docs_check_catches_violations PROPERTIES LABELS docs)
