# Warnings, sanitizers and CPU tuning shared by every Weft target (through weft_project_options).
add_library(weft_project_options INTERFACE)
target_compile_options(weft_project_options INTERFACE -Wall -Wextra -Wpedantic -Wshadow
                                                       -Wnon-virtual-dtor -Wno-unused-parameter)
if(WEFT_WERROR)
  target_compile_options(weft_project_options INTERFACE -Werror)
endif()
if(WEFT_NATIVE_ARCH)
  target_compile_options(weft_project_options INTERFACE -march=native)
endif()
if(WEFT_SANITIZE)
  target_compile_options(weft_project_options INTERFACE -fsanitize=address,undefined
                                                         -fno-omit-frame-pointer
                                                         -fno-sanitize-recover=undefined)
  target_link_options(weft_project_options INTERFACE -fsanitize=address,undefined)
endif()
