// Balanced shares of a batch among ranks: greedy, costliest first (longest processing time).
#include "batch_shares.h"

#include <algorithm>
#include <numeric>

#include "weft/core/error.h"

namespace weft::train::detail {

std::vector<std::size_t> balanced_share(std::span<const std::size_t> ids,
                                        std::span<const double> costs, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    fail("trainer", "rank ", rank, " of ", ranks, " ranks has no share of a batch");
  for (const std::size_t id : ids)
    if (id >= costs.size())
      fail("trainer", "example ", id, " has no cost (", costs.size(), " costs given)");
  const auto cost = [&](std::size_t position) { return costs[ids[position]]; };
  std::vector<std::size_t> order(ids.size());  // positions in ids, costliest first
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return cost(a) > cost(b); });
  std::vector<double> load(std::size_t(ranks), 0.0);
  std::vector<bool> mine(ids.size(), false);
  for (const std::size_t position : order) {
    const std::size_t least =
        std::size_t(std::min_element(load.begin(), load.end()) - load.begin());
    load[least] += cost(position);
    if (least == std::size_t(rank)) mine[position] = true;
  }
  std::vector<std::size_t> share;
  for (std::size_t position = 0; position < ids.size(); ++position)
    if (mine[position]) share.push_back(ids[position]);
  return share;
}

}  // namespace weft::train::detail
