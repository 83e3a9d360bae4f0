// Vocabulary and its construction from SST leaves (see weft/io/vocabulary.h).
#include "weft/io/vocabulary.h"

#include <algorithm>
#include <limits>

#include "weft/core/error.h"

namespace weft::io {

Vocabulary Vocabulary::with_unknown(std::string unknown_token) {
  Vocabulary vocabulary;
  vocabulary.unknown_id_ = vocabulary.add(unknown_token);
  return vocabulary;
}

std::int32_t Vocabulary::add(std::string_view word) {
  if (const auto found = index_.find(word); found != index_.end()) return found->second;
  if (words_.size() >= std::size_t(std::numeric_limits<std::int32_t>::max()))
    fail("vocabulary", "cannot add '", word, "': the vocabulary is full");
  const auto id = std::int32_t(words_.size());
  words_.emplace_back(word);
  index_.emplace(words_.back(), id);
  return id;
}

std::optional<std::int32_t> Vocabulary::find(std::string_view word) const {
  if (const auto found = index_.find(word); found != index_.end()) return found->second;
  return std::nullopt;
}

std::int32_t Vocabulary::id(std::string_view word) const {
  if (const auto found = find(word)) return *found;
  if (!unknown_id_)
    fail("vocabulary", "unknown word '", word, "' and the vocabulary has no unknown-word id");
  return *unknown_id_;
}

const std::string& Vocabulary::word(std::int32_t id) const {
  if (id < 0 || std::size_t(id) >= words_.size())
    fail("vocabulary", "id ", id, " is out of range for a vocabulary of ", words_.size(), " words");
  return words_[std::size_t(id)];
}

std::int32_t Vocabulary::unknown_id() const {
  if (!unknown_id_) fail("vocabulary", "this vocabulary has no unknown-word id");
  return *unknown_id_;
}

std::vector<std::int32_t> Vocabulary::ids(const std::vector<std::string>& words) const {
  std::vector<std::int32_t> out;
  out.reserve(words.size());
  for (const std::string& w : words) out.push_back(id(w));
  return out;
}

Vocabulary build_vocabulary(const std::vector<SstTree>& trees, const VocabularyOptions& options) {
  // Count in order of first appearance, then sort stably by count.
  Vocabulary order;
  std::vector<std::int64_t> counts;
  for (const SstTree& tree : trees)
    for (const std::string& w : leaf_words(tree)) {
      const std::int32_t id = order.add(w);
      if (std::size_t(id) == counts.size()) counts.push_back(0);
      ++counts[std::size_t(id)];
    }
  std::vector<std::int32_t> ranked(counts.size());
  for (std::size_t i = 0; i < ranked.size(); ++i) ranked[i] = std::int32_t(i);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](std::int32_t a, std::int32_t b) { return counts[a] > counts[b]; });
  Vocabulary vocabulary = options.unknown_token.empty()
                              ? Vocabulary()
                              : Vocabulary::with_unknown(options.unknown_token);
  for (const std::int32_t id : ranked)
    if (counts[std::size_t(id)] >= options.min_count) vocabulary.add(order.word(id));
  return vocabulary;
}

}  // namespace weft::io
