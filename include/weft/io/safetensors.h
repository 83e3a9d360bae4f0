// Checkpoints in the safetensors layout, so that PyTorch and NumPy users can open them with
// nothing but a JSON parser: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype ("F32" / "I32"), shape and byte range, then the raw little-endian data.
// Saving writes a temporary file beside the target ("<path>.tmp-<pid>-XXXXXX") and renames it,
// so a failed save never destroys the previous checkpoint; a save killed midway leaves its
// temporary behind, which the next save of the same path removes once that process is gone.
// Loading validates every field before trusting it, within weft/io/input_limits.h (JSON nesting
// of the header, elements per tensor).
#pragma once

#include <map>
#include <string>

#include "weft/core/export.h"
#include "weft/tensor/tensor.h"

WEFT_API_BEGIN
namespace weft::io {

// Tensors by name (sorted, so a file's layout does not depend on insertion order).
using TensorMap = std::map<std::string, Tensor>;
// Free-form string pairs stored under the header's "__metadata__" key.
using Metadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  TensorMap tensors;
  Metadata metadata;
};

// Writes float32 / int32 host or device tensors (copied to the host) to `path`. Names must be
// non-empty and not "__metadata__". Throws weft::Error naming the file on any failure, after
// removing the temporary file; the previous file at `path`, if any, is then untouched.
void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const Metadata& metadata = {});

// Reads a file written by save_safetensors or by the Python `safetensors` package (F32 and
// I32 tensors only). Throws weft::Error naming the file, and the tensor where one is at
// fault, when the file is truncated, the header length runs past the end, the header is not
// valid JSON of the expected form, a dtype is unknown, a byte range is out of bounds or
// overlaps another, or a shape does not match its byte range.
SafetensorsContents load_safetensors(const std::string& path);

}  // namespace weft::io
WEFT_API_END
