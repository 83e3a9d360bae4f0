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
# A private symbol is one whose own name is in a private namespace: the part of the demangled
# line before its first '(' or '<'. A std:: template instantiated over a private type (a
# vector of a private struct, emitted as a weak symbol by an unoptimized build) is std's.
set(private_names "weft::backend::cpu::" "weft::backend::cuda::" "weft::backend::add_into"
                  "weft::loom::detail::gather_chunk_rows" "weft::train::detail::")
string(REPLACE ";" "," symbols "${symbols}")
string(REPLACE "\n" ";" lines "${symbols}")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^[0-9a-fA-F]+ [A-Za-z] " "" name "${line}")
  string(REGEX MATCH "^[^(<]+" head "${name}")
  foreach(private IN LISTS private_names)
    string(FIND "${head}" "${private}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "libweft exports the private '${name}' (declared in src/ only)")
    endif()
  endforeach()
endforeach()
message(STATUS "libweft exports its public API only")
