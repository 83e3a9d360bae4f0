// The shares of a batch among data-parallel ranks (src/train/batch_shares.h): every example
// goes to exactly one rank, in batch order; the shares' costs differ by at most the costliest
// example; equal costs give counts that differ by at most one; over many random batches the
// slowest rank does less than with contiguous halves; misuse is named.
#include <algorithm>
#include <numeric>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "train/batch_shares.h"
#include "weft/core/error.h"

namespace weft::train::detail {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

double cost_of(const std::vector<std::size_t>& share, const std::vector<double>& costs) {
  double total = 0;
  for (std::size_t id : share) total += costs[id];
  return total;
}

TEST(BatchShares, EveryExampleGoesToOneRankInBatchOrderAndTheCostsBalance) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> size(1, 80);
  std::vector<double> costs(500);
  for (double& c : costs) c = std::round(size(random));
  for (const int ranks : {1, 2, 3, 8}) {
    for (const std::size_t batch : {1, 5, 25, 64}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, batch " + std::to_string(batch));
      std::vector<std::size_t> ids(costs.size());
      std::iota(ids.begin(), ids.end(), std::size_t(0));
      std::shuffle(ids.begin(), ids.end(), random);
      ids.resize(batch);
      std::vector<std::size_t> seen;
      double most = 0, least = 1e300, costliest = 0;
      for (std::size_t id : ids) costliest = std::max(costliest, costs[id]);
      for (int rank = 0; rank < ranks; ++rank) {
        const std::vector<std::size_t> share = balanced_share(ids, costs, rank, ranks);
        // In the batch's order: positions in ids ascend.
        std::vector<std::ptrdiff_t> positions;
        for (std::size_t id : share)
          positions.push_back(std::find(ids.begin(), ids.end(), id) - ids.begin());
        EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end()));
        seen.insert(seen.end(), share.begin(), share.end());
        most = std::max(most, cost_of(share, costs));
        least = std::min(least, cost_of(share, costs));
      }
      std::sort(seen.begin(), seen.end());
      std::vector<std::size_t> expected = ids;
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(seen, expected);
      EXPECT_LE(most - least, costliest);
    }
  }
}

TEST(BatchShares, EqualCostsShareTheCount) {
  const std::vector<double> costs(40, 1.0);
  std::vector<std::size_t> ids(25);
  std::iota(ids.begin(), ids.end(), std::size_t(10));
  for (const int ranks : {2, 3, 4}) {
    std::size_t total = 0;
    for (int rank = 0; rank < ranks; ++rank) {
      const std::size_t n = balanced_share(ids, costs, rank, ranks).size();
      EXPECT_GE(n, ids.size() / std::size_t(ranks));
      EXPECT_LE(n, (ids.size() + std::size_t(ranks) - 1) / std::size_t(ranks));
      total += n;
    }
    EXPECT_EQ(total, ids.size());
  }
}

// Tree sizes like SST's (nodes of 1 to ~110): the slowest of two ranks against contiguous
// halves, summed over 300 batches of 25.
TEST(BatchShares, TheSlowestRankDoesLessThanWithContiguousHalves) {
  std::mt19937 random(11);
  std::gamma_distribution<double> leaves(4.0, 5.0);
  std::vector<double> costs(8000);
  for (double& c : costs) c = 2 * std::max(1.0, std::round(leaves(random))) - 1;
  std::vector<std::size_t> order(costs.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::shuffle(order.begin(), order.end(), random);
  double balanced = 0, contiguous = 0, mean = 0;
  for (std::size_t first = 0; first + 25 <= 300 * 25; first += 25) {
    const std::span<const std::size_t> batch(order.data() + first, 25);
    const double a = cost_of(balanced_share(batch, costs, 0, 2), costs);
    const double b = cost_of(balanced_share(batch, costs, 1, 2), costs);
    balanced += std::max(a, b);
    double half = 0, all = 0;
    for (std::size_t i = 0; i < 25; ++i) (i < 12 ? half : all) += costs[batch[i]];
    all += half;
    contiguous += std::max(half, all - half);
    mean += all / 2;
  }
  EXPECT_LT(balanced, contiguous);
  EXPECT_LT(balanced / mean, 1.02);  // within 2% of a perfect split
}

TEST(BatchShares, MisuseIsNamed) {
  const std::vector<double> costs(4, 1.0);
  const std::vector<std::size_t> ids = {0, 1, 2, 3};
  EXPECT_THAT([&] { balanced_share(ids, costs, 2, 2); },
              ThrowsMessage<Error>(HasSubstr("rank 2 of 2 ranks has no share")));
  const std::vector<std::size_t> beyond = {0, 9};
  EXPECT_THAT([&] { balanced_share(beyond, costs, 0, 2); },
              ThrowsMessage<Error>(HasSubstr("example 9 has no cost (4 costs given)")));
}

}  // namespace
}  // namespace weft::train::detail
