// Vocabulary: words <-> dense ids (the rows of an embedding matrix). An optional unknown-word
// token takes id 0, and looking up any word not in the vocabulary then gives that id.
// build_vocabulary orders words by frequency (ties by first appearance), so the ids of a
// corpus never depend on hash order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "weft/core/export.h"
#include "weft/io/sst.h"

WEFT_API_BEGIN
namespace weft::io {

class Vocabulary {
 public:
  // No unknown-word id: id() of an absent word throws.
  Vocabulary() = default;
  // `unknown_token` becomes id 0 and the id of every absent word.
  static Vocabulary with_unknown(std::string unknown_token = "<unk>");

  // The word's id, adding it at the end when new.
  std::int32_t add(std::string_view word);
  // The word's id, or the unknown id; throws "[vocabulary] unknown word 'w'" without one.
  std::int32_t id(std::string_view word) const;
  // The word's id, or nothing (the unknown token itself is found).
  std::optional<std::int32_t> find(std::string_view word) const;
  bool contains(std::string_view word) const { return find(word).has_value(); }
  // Throws naming the id and the size when out of range.
  const std::string& word(std::int32_t id) const;

  std::int64_t size() const { return std::int64_t(words_.size()); }
  const std::vector<std::string>& words() const { return words_; }
  bool has_unknown() const { return unknown_id_.has_value(); }
  // Throws when there is none.
  std::int32_t unknown_id() const;

  // Ids of a sequence of words (absent words map to the unknown id, or throw without one).
  std::vector<std::int32_t> ids(const std::vector<std::string>& words) const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::int32_t, Hash, std::equal_to<>> index_;
  std::vector<std::string> words_;
  std::optional<std::int32_t> unknown_id_;
};

struct VocabularyOptions {
  // Words seen fewer times are left out (they map to the unknown id).
  std::int64_t min_count = 1;
  // Empty: no unknown token, and looking up a dropped or unseen word throws.
  std::string unknown_token = "<unk>";
};

// The leaf words of `trees`, most frequent first (ties: first appearance), after the
// unknown token when there is one.
Vocabulary build_vocabulary(const std::vector<SstTree>& trees,
                            const VocabularyOptions& options = {});

}  // namespace weft::io
WEFT_API_END
