// Word-vector text files (io::load_word_vectors), GloVe or word2vec with a "count dim" header.
#include "weft/io/word_vectors.h"
#include "fuzz_target.h"

using namespace weft;

WEFT_FUZZ_TARGET(word_vectors) {
  const fuzz::MemoryFile file(input);
  const io::WordVectors vectors = io::load_word_vectors(file.path());
  (void)vectors.vectors.numel();
}
