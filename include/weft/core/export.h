// Symbol visibility of libweft. The library compiles with hidden visibility, so only what a
// public header declares is exported: each header in include/weft/ puts its declarations
// between WEFT_API_BEGIN and WEFT_API_END, and what src/ declares stays inside the library.
// WEFT_API marks a single declaration the same way.
#pragma once

#if defined(_WIN32)
#define WEFT_API
#define WEFT_API_BEGIN
#define WEFT_API_END
#else
#define WEFT_API __attribute__((visibility("default")))
#define WEFT_API_BEGIN _Pragma("GCC visibility push(default)")
#define WEFT_API_END _Pragma("GCC visibility pop")
#endif
