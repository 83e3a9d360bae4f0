// Tatoeba sentence files "id<TAB>language<TAB>sentence" (io::read_tatoeba_file), as langid reads.
#include "weft/io/tatoeba.h"
#include "fuzz_target.h"

using namespace weft;

WEFT_FUZZ_TARGET(tatoeba) {
  const fuzz::MemoryFile file(input);
  (void)io::read_tatoeba_file(file.path());
}
