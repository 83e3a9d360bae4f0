# The shipped libweft exports its public API and hides what src/ declares (cmake -P, with
# WEFT_LIBRARY and NM set): a public function and class must be in the dynamic symbol table,
# the backend's private kernels and the layers' private helpers must not.
execute_process(COMMAND ${NM} -D -C --defined-only ${WEFT_LIBRARY} OUTPUT_VARIABLE symbols
                RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "nm failed on ${WEFT_LIBRARY}")
endif()
foreach(public IN ITEMS "weft::Tensor::zeros(" "weft::matmul(weft::Var, weft::Var,"
                        "typeinfo for weft::Error" "weft::loom::Executor::")
  string(FIND "${symbols}" "${public}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "libweft does not export '${public}' (a public header declares it)")
  endif()
endforeach()
foreach(private IN ITEMS "weft::backend::cpu::" "weft::backend::cuda::" "weft::backend::add_into("
                         "weft::loom::detail::gather_chunk_rows(" "weft::train::detail::")
  string(FIND "${symbols}" "${private}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "libweft exports the private '${private}' (declared in src/ only)")
  endif()
endforeach()
message(STATUS "libweft exports its public API only")
