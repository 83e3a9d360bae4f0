// A data-parallel run's shares of one batch among its ranks, balanced by each example's cost
// (TrainableModel::example_cost), so that the ranks finish a step together rather than wait
// for the one that drew the larger trees. Private to the train layer.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace weft::train::detail {

// Rank `rank`'s share of `ids` among `ranks`: the ids, costliest first (the earlier id on a
// tie), each go to the rank whose share costs least so far (the lower rank on a tie), so every
// rank computes the same split and no share exceeds the mean by more than the costliest id.
// `costs` is indexed by id. The share keeps the order of `ids`.
std::vector<std::size_t> balanced_share(std::span<const std::size_t> ids,
                                        std::span<const double> costs, int rank, int ranks);

}  // namespace weft::train::detail
