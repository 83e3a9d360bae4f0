// A batch's plan: everything the executor needs from the host to run a scheduled weave, worked
// out before the run (on the weaving thread when the batch is woven ahead). Every index array
// (each gather's row references) and every constant of the weave is packed into ONE buffer of
// int32 words, so a run on a device sends it in one asynchronous copy (CUDA: through pinned
// staging, on the library's stream) and no kernel of the batch waits for another upload; the
// layout and the offsets each gather reads are plain data, the same on every device.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "weft/core/export.h"
#include "weft/loom/executor.h"

WEFT_API_BEGIN
namespace weft::loom {

// One gather: rows x positions references (chunk, row) at packed words [refs_word, refs_word +
// 2 * rows * positions), position-major; a reference's chunk is an index into
// chunks[first_chunk, first_chunk + num_chunks) of BatchPlan::gather_chunks (the run's chunk
// ids the gather reads), so the kernels get a short table.
struct PlannedGather {
  std::uint64_t refs_word = 0;
  std::uint32_t rows = 0;
  std::uint32_t positions = 0;
  std::uint32_t first_chunk = 0;
  std::uint32_t num_chunks = 0;
};

// How a step's operation gets one input: a view of rows [row, row + rows) of one chunk, or
// the gather `gather` (a concat_inputs operation has one input for all positions: gathered,
// or a view of rows [row, row + rows * positions) seen as rows * positions wide).
struct PlannedArgument {
  bool is_view = false;
  std::uint32_t chunk = 0;  // a view's chunk
  std::uint32_t row = 0;    // a view's first row
  std::uint32_t gather = 0;
  // A ragged_rows step (loom.h): its one argument holds `ragged_rows` rows (every call's values,
  // call after call); their segment ids (int32 [ragged_rows]) lie at packed words [ids_word,
  // ids_word + ragged_rows), the calls' counts (int32 [calls]) right after them.
  std::uint32_t ragged_rows = 0;
  std::uint64_t ids_word = 0;
};

// One type's constants: rows of the type at packed words [word, word + words).
struct PlannedConstants {
  TypeId type = 0;
  std::int64_t rows = 0;
  std::uint64_t word = 0;
  std::uint64_t bytes = 0;
};

struct BatchPlan {
  // Every segment starts at a multiple of this many words (16 bytes: any dtype's alignment).
  static constexpr std::uint64_t kAlignWords = 4;

  // The packed buffer (host, int32 [words]): constants, then the gathers' references.
  Tensor packed;
  std::vector<PlannedConstants> constants;  // the run's first chunks, in this order
  // The depth-0 chunks after the constants: one per weaver parameter, then one per fed type
  // (in the order of first use), then the imported chunks (when any imported value is used).
  std::uint32_t parameter_chunks = 0;
  std::vector<TypeId> fed_types;
  std::vector<std::int64_t> fed_rows_used;  // per type: 1 + the largest batch row woven, or 0
  std::uint32_t import_chunks = 0;
  bool uses_imports = false;

  std::vector<PlannedGather> gathers;
  std::vector<std::uint32_t> gather_chunks;
  std::vector<PlannedArgument> arguments;          // step after step
  std::vector<std::uint32_t> step_first_argument;  // per step, into arguments; + one at the end
  std::vector<ValueLocation> locations;            // per value, as the run places it
  std::vector<std::int64_t> result_gathers;        // per requested list: its gather, or -1
  std::vector<TypeId> result_types;                // per requested list: its values' type
  std::vector<std::int64_t> output_gathers;        // per type: weaver.outputs() of it, or -1
  std::int64_t bytes_gathered = 0;                 // by the steps' gathers (RunStats)
  std::int64_t gathers_skipped = 0;                // arguments passed as views (RunStats)

  std::uint64_t words() const { return std::uint64_t(packed.numel()); }
  // Packed words [word, word + count) of `packed_there` (the buffer wherever it was sent).
  static Tensor segment(const Tensor& packed_there, std::uint64_t word, std::uint64_t count);
  // Packed words from `word` on seen as a tensor of `shape` and `dtype` (a constants block),
  // sharing packed_there's storage and keeping it alive.
  static Tensor view_as(const Tensor& packed_there, std::uint64_t word, const Shape& shape,
                        DType dtype);
};

// Plans a run of `schedule` over `weaver`, as Executor::run will place it: `import_chunks` and
// `import_rows` are what Executor::import was given (the plan of a weave without imported
// values does not depend on them). `result_lists` are lists of values the caller will gather
// after the run (LoomResult::planned_gather(k), all values of one type each): their
// references join the packed buffer too, as do those of weaver.outputs() per type.
BatchPlan make_batch_plan(const Weaver& weaver, const Schedule& schedule,
                          std::uint32_t import_chunks = 0,
                          std::span<const ValueLocation> import_rows = {},
                          std::span<const std::vector<Value>> result_lists = {});

}  // namespace weft::loom
WEFT_API_END
