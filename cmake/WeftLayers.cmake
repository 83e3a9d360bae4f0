# Weft's layering, written once: each layer, the source folders it owns and the layers it may
# use directly. weft_add_layer() builds a layer's static library linking only those layers, and
# cmake/check_layers.cmake (run by every build) fails on an include that breaks this table.
#
# A layer may include the public headers (include/weft/<dir>/) of itself and of every layer it
# reaches through WEFT_LAYER_<name>_USES; private headers (src/<dir>/*.h) only of itself, or of a
# layer named in WEFT_LAYER_<name>_PRIVATE_OF. Public headers never include private ones.

set(WEFT_LAYERS core tensor autodiff dist io loom flow nn blocks train models serve bench_treelstm)

# layer           folders (include/weft/<f>, src/<f>)   uses directly
set(WEFT_LAYER_core_DIRS core)
set(WEFT_LAYER_core_USES "")
# The tensor and its backends are one layer: a tensor allocates and copies through the backend.
set(WEFT_LAYER_tensor_DIRS tensor backend)
set(WEFT_LAYER_tensor_USES core)
set(WEFT_LAYER_autodiff_DIRS autodiff)
set(WEFT_LAYER_autodiff_USES tensor)
# The ops are the kernels' clients by design (ops validate, kernels only assert), so autodiff
# is the one layer that may include the backend's private kernel table (src/backend/kernels.h).
set(WEFT_LAYER_autodiff_PRIVATE_OF tensor)
set(WEFT_LAYER_dist_DIRS dist)
set(WEFT_LAYER_dist_USES core)
set(WEFT_LAYER_io_DIRS io)
set(WEFT_LAYER_io_USES tensor)
set(WEFT_LAYER_loom_DIRS loom)
set(WEFT_LAYER_loom_USES autodiff)
# Programs that decide as they go: steps of loom weaves; reads the loom's chunk gather.
set(WEFT_LAYER_flow_DIRS flow)
set(WEFT_LAYER_flow_USES loom)
set(WEFT_LAYER_flow_PRIVATE_OF loom)
set(WEFT_LAYER_nn_DIRS nn)
set(WEFT_LAYER_nn_USES autodiff)
set(WEFT_LAYER_blocks_DIRS blocks)
set(WEFT_LAYER_blocks_USES loom nn flow)
set(WEFT_LAYER_train_DIRS train)
set(WEFT_LAYER_train_USES autodiff io dist)
set(WEFT_LAYER_models_DIRS models)
set(WEFT_LAYER_models_USES blocks train flow)
set(WEFT_LAYER_serve_DIRS serve)
set(WEFT_LAYER_serve_USES models)
# The ICLR 2017 Tree-LSTM benchmark (bench/treelstm): not part of libweft, a client of it.
set(WEFT_LAYER_bench_treelstm_DIRS "")
set(WEFT_LAYER_bench_treelstm_ROOT bench/treelstm)
set(WEFT_LAYER_bench_treelstm_USES loom train)

# Clients of the installed library: public headers of any layer, never a private one. Tests
# and the microbenchmarks in bench/*.cpp are white-box (they include src/ on purpose and link
# the static layer libraries), so the check leaves them out.
set(WEFT_CLIENT_ROOTS tools examples)

# Every layer that `layer` may reach (itself included), into `out`.
function(weft_layer_closure layer out)
  set(seen "")
  set(todo ${layer})
  while(todo)
    list(POP_FRONT todo current)
    if(NOT current IN_LIST seen)
      list(APPEND seen ${current})
      list(APPEND todo ${WEFT_LAYER_${current}_USES})
    endif()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()
