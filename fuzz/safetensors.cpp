// safetensors files (io::load_safetensors): the header length, the JSON header, every entry.
#include "weft/io/safetensors.h"
#include "fuzz_target.h"

using namespace weft;

WEFT_FUZZ_TARGET(safetensors) {
  const fuzz::MemoryFile file(input);
  const io::SafetensorsContents contents = io::load_safetensors(file.path());
  for (const auto& [name, tensor] : contents.tensors) (void)tensor.numel();
}
