# Proves the installed package works for an outside CMake project: install this build tree
# into a private prefix, configure and build tests/consumer against it with find_package(weft),
# run the result. Fixtures keep the three steps in order under ctest -j.
set(weft_consumer_prefix ${CMAKE_BINARY_DIR}/consumer-prefix)
set(weft_consumer_build ${CMAKE_BINARY_DIR}/consumer-build)

# Under WEFT_SANITIZE libweft needs the ASan runtime loaded first, so the consumer is built
# with the same sanitizer flags (passed explicitly: the package itself must not carry them).
set(weft_consumer_flags "")
set(weft_consumer_link_flags "")
if(WEFT_SANITIZE)
  set(weft_consumer_flags "-fsanitize=address,undefined -fno-omit-frame-pointer")
  set(weft_consumer_link_flags "-fsanitize=address,undefined")
endif()
if(CMAKE_BUILD_TYPE)
  set(weft_consumer_build_type ${CMAKE_BUILD_TYPE})
else()
  set(weft_consumer_build_type Release)
endif()

add_test(NAME weft_consumer_install
         COMMAND ${CMAKE_COMMAND} --install ${CMAKE_BINARY_DIR} --prefix ${weft_consumer_prefix}
                 --config $<CONFIG>)
set_tests_properties(weft_consumer_install PROPERTIES FIXTURES_SETUP weft_consumer_installed
                                                      LABELS consumer)

add_test(NAME weft_consumer_build
         COMMAND ${CMAKE_CTEST_COMMAND}
                 --build-and-test ${CMAKE_CURRENT_LIST_DIR} ${weft_consumer_build}
                 --build-generator ${CMAKE_GENERATOR}
                 --build-makeprogram ${CMAKE_MAKE_PROGRAM}
                 --build-options -DCMAKE_PREFIX_PATH=${weft_consumer_prefix}
                                 -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
                                 -DCMAKE_BUILD_TYPE=${weft_consumer_build_type}
                                 -DCMAKE_CXX_FLAGS=${weft_consumer_flags}
                                 -DCMAKE_EXE_LINKER_FLAGS=${weft_consumer_link_flags})
set_tests_properties(weft_consumer_build PROPERTIES FIXTURES_REQUIRED weft_consumer_installed
                                                    FIXTURES_SETUP weft_consumer_built
                                                    LABELS consumer)

add_test(NAME weft_consumer_run COMMAND ${weft_consumer_build}/weft_consumer)
set_tests_properties(weft_consumer_run PROPERTIES FIXTURES_REQUIRED
                                                  "weft_consumer_installed;weft_consumer_built"
                                                  LABELS consumer)
