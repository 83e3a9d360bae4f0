// The block machinery: a Block is a typed piece of a model (input type -> output type) that runs
// at weave time on each example and emits loom calls. Types are inferred when blocks are
// composed: each block has an input and an output type slot; composing links slots, and a slot
// set twice to different types throws at once, naming both types and the block. This header is
// what the block classes (blocks.h) are built from and what a custom block derives from.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "weft/blocks/types.h"
#include "weft/core/export.h"
#include "weft/loom/weaver.h"

WEFT_API_BEGIN
namespace weft::blocks {

class Block;
class WeaveState;

// A type variable: unknown until set, then fixed. Observers run when it becomes known (at once
// if it already is); setting a known slot to a different type throws weft::Error naming the
// owning block, the slot (input/output) and both types.
class TypeSlot {
 public:
  TypeSlot(std::string owner, const char* side) : owner_(std::move(owner)), side_(side) {}
  bool known() const { return type_.has_value(); }
  const Type& type() const;
  void set(const Type& type);
  void observe(std::function<void(const Type&)> observer);
  // Runs before a type is accepted (throws to reject a kind of type, e.g. Map over a Tensor).
  void set_check(std::function<void(const Type&)> check) { check_ = std::move(check); }
  const std::string& owner() const { return owner_; }

 private:
  std::optional<Type> type_;
  std::vector<std::function<void(const Type&)>> observers_;
  std::function<void(const Type&)> check_;
  std::string owner_;
  const char* side_;
};
using SlotPtr = std::shared_ptr<TypeSlot>;

// a and b hold the same type: whichever becomes known sets the other.
void unify(const SlotPtr& a, const SlotPtr& b);
// target = fn(types of sources) once every source is known (fn may throw to reject them).
void derive(const SlotPtr& target, std::vector<SlotPtr> sources,
            std::function<Type(std::span<const Type>)> fn);
// Throws "[blocks] bad input type X for <block>, expected ..." unless kind is accepted.
void expect_kind(const std::string& block, const Type& type,
                 std::initializer_list<Type::Kind> kinds);

struct WeaveValue;

namespace detail {
// The per-thread pool behind WeavePoolAllocator (weave_pool.cpp): blocks of up to
// kWeavePoolLargest bytes, in power-of-two size classes, come from and go back to the calling
// thread's free lists (each list capped, the rest returned to the heap; the lists are freed when
// the thread ends); larger requests go to the heap directly. Under AddressSanitizer a block in
// a free list is poisoned (all but its list link), so a use after its release is reported as
// with the heap.
inline constexpr std::size_t kWeavePoolLargest = 4096;
void* weave_pool_allocate(std::size_t bytes);
void weave_pool_release(void* block, std::size_t bytes) noexcept;
// Blocks now held in the calling thread's free lists (for tests).
std::size_t weave_pool_cached_blocks() noexcept;
}  // namespace detail

// The allocator of weave-time item lists and their shared handles: a weave makes and drops a
// few small lists per tree node or atom (tuples, sequences, gathered neighbours), which the
// heap's per-thread cache (a handful of blocks per size) does not absorb; reusing them through
// the pool keeps the weave off malloc and free. Stateless: every instance is interchangeable.
template <typename T>
struct WeavePoolAllocator {
  using value_type = T;
  WeavePoolAllocator() = default;
  template <typename U>
  WeavePoolAllocator(const WeavePoolAllocator<U>&) noexcept {}  // NOLINT: rebinding, implicit
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));  // what the pool's blocks give
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(detail::weave_pool_allocate(n * sizeof(T)));
  }
  void deallocate(T* block, std::size_t n) noexcept {
    detail::weave_pool_release(block, n * sizeof(T));
  }
  template <typename U>
  bool operator==(const WeavePoolAllocator<U>&) const noexcept {
    return true;
  }
};

// A list of weave-time values (tuple items, sequence elements) in pooled storage.
using WeaveList = std::vector<WeaveValue, WeavePoolAllocator<WeaveValue>>;

// The items of a WeaveValue (tuple items, sequence elements, the broadcast element), shared by
// the copies of a value: copying a value costs O(1) whatever its length, so a Broadcast handing
// a sequence to every row of a Zip, or a Composition reading a wire twice, does not copy the
// sequence (which made a molecule's weave quadratic in its atoms). Writing to shared items
// copies them first (copy-on-write); reading never does.
class WeaveItems {
 public:
  using const_iterator = WeaveList::const_iterator;

  WeaveItems() = default;
  WeaveItems(WeaveList items);  // NOLINT: implicit, as the vector it replaces

  std::size_t size() const;
  bool empty() const { return size() == 0; }
  const WeaveValue& operator[](std::size_t i) const;
  const_iterator begin() const;
  const_iterator end() const;
  // The items as a vector (read-only).
  const WeaveList& vector() const;

  void push_back(WeaveValue value);
  void reserve(std::size_t n);

 private:
  WeaveList& writable();
  // The list and its shared count in one pooled block.
  template <typename... Args>
  static std::shared_ptr<WeaveList> make_items(Args&&... args) {
    return std::allocate_shared<WeaveList>(WeavePoolAllocator<WeaveList>(),
                                           std::forward<Args>(args)...);
  }
  std::shared_ptr<WeaveList> items_;
};

// A value at weave time: a loom value (tensor), the user's data (input), or a tuple,
// sequence or broadcast of values.
struct WeaveValue {
  Type::Kind kind = Type::Kind::kVoid;
  loom::Value tensor = 0;
  const Input* input = nullptr;
  WeaveItems items;  // tuple items, sequence elements, the broadcast element

  static WeaveValue of_tensor(loom::Value v) {
    WeaveValue w;
    w.kind = Type::Kind::kTensor;
    w.tensor = v;
    return w;
  }
  static WeaveValue of_input(const Input* in) {
    WeaveValue w;
    w.kind = Type::Kind::kInput;
    w.input = in;
    return w;
  }
  static WeaveValue of(Type::Kind kind, WeaveList items) {
    WeaveValue w;
    w.kind = kind;
    w.items = WeaveItems(std::move(items));
    return w;
  }
};

inline WeaveItems::WeaveItems(WeaveList items)
    : items_(items.empty() ? nullptr : make_items(std::move(items))) {}
inline const WeaveList& WeaveItems::vector() const {
  static const WeaveList kNone;
  return items_ ? *items_ : kNone;
}
inline std::size_t WeaveItems::size() const { return items_ ? items_->size() : 0; }
inline const WeaveValue& WeaveItems::operator[](std::size_t i) const { return (*items_)[i]; }
inline WeaveItems::const_iterator WeaveItems::begin() const { return vector().begin(); }
inline WeaveItems::const_iterator WeaveItems::end() const { return vector().end(); }
inline WeaveList& WeaveItems::writable() {
  if (!items_)
    items_ = make_items();
  else if (items_.use_count() > 1)
    items_ = make_items(*items_);
  return *items_;
}
inline void WeaveItems::push_back(WeaveValue value) { writable().push_back(std::move(value)); }
inline void WeaveItems::reserve(std::size_t n) { writable().reserve(n); }

// What a Function-like block registers with the loom: one operation per block instance.
struct OperationSpec {
  std::string name;
  std::vector<loom::TypeShape> inputs, outputs;
  loom::OperationBody body;
  loom::OperationOptions options;
};

namespace detail {

class BlockImpl {
 public:
  // kind: "Map", "Function", ...; name: optional, shown in messages.
  explicit BlockImpl(std::string kind, std::string name = "");
  virtual ~BlockImpl() = default;
  BlockImpl(const BlockImpl&) = delete;
  BlockImpl& operator=(const BlockImpl&) = delete;

  const SlotPtr& in() const { return in_; }
  const SlotPtr& out() const { return out_; }
  // "<Map>", "<Function 'cell'>".
  const std::string& describe() const { return description_; }
  const std::string& kind() const { return kind_; }

  // The blocks this one runs (for the compiler's walk).
  virtual std::vector<Block> children() const;
  // Checked at compile time: by default, both types must be known.
  virtual void validate() const;
  // Runs the block on one example's value.
  virtual WeaveValue eval(WeaveState& state, const WeaveValue& input) const = 0;
  // Function-like blocks: the loom operation (types are known by then).
  virtual std::optional<OperationSpec> operation() const { return std::nullopt; }
  // Metric blocks: the metric's name and the type of its values.
  virtual const std::string* metric_name() const { return nullptr; }
  // Collect / Collected blocks: the collection's name.
  virtual const std::string* collect_name() const { return nullptr; }
  virtual bool is_identity() const { return false; }
  // True for a block that reads computed values while weaving (a model-decided Loop): a root
  // holding one runs on the flow engine (compiler.h).
  virtual bool reads_values() const { return false; }

 private:
  std::string kind_;
  std::string description_;
  SlotPtr in_, out_;
};

}  // namespace detail

// A handle to a block (copies share it). The block classes (Map, Fold, Function, ...) derive
// from it, so `Block b = Map(Scalar()) >> Sum();` reads like the model.
class Block {
 public:
  Block() = default;
  explicit Block(std::shared_ptr<detail::BlockImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  // Known types (nullopt while not yet inferred).
  std::optional<Type> input_type() const;
  std::optional<Type> output_type() const;
  // Annotates a type where inference cannot tell; throws if it contradicts a known one.
  Block& set_input_type(const Type& type);
  Block& set_output_type(const Type& type);
  const std::string& describe() const { return impl().describe(); }

  detail::BlockImpl& impl() const;
  const std::shared_ptr<detail::BlockImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<detail::BlockImpl> impl_;
};

// Sequential composition: a's output feeds b (Pipe(a, b)).
Block operator>>(const Block& a, const Block& b);

namespace detail {
struct Compiled;
struct WovenRecords;
}  // namespace detail

// What blocks see while weaving one example: the weaver, the compiled loom's ids, and the
// per-weave caches and records (metrics, memoized constants, transformed inputs).
class WeaveState {
 public:
  WeaveState(const detail::Compiled& compiled, loom::Weaver& weaver, detail::WovenRecords& records);
  ~WeaveState();
  WeaveState(const WeaveState&) = delete;
  WeaveState& operator=(const WeaveState&) = delete;

  loom::Weaver& weaver() { return *weaver_; }
  // The index (in the batch) of the example being woven.
  std::int32_t example() const { return example_; }
  void set_example(std::int32_t example);
  // The loom type of a tensor type; the operation of a Function-like block.
  loom::TypeId type_id(const Type& type) const;
  loom::OpId operation_of(const detail::BlockImpl* block) const;
  // A memoized depth-0 value for (block, key) within this weave, made by `make` once.
  loom::Value memoized(const detail::BlockImpl* block, std::int64_t key,
                       const std::function<loom::Value()>& make);
  // Keeps a value made at weave time (InputTransform's result) alive for the weave.
  const Input* keep(Input value);
  // The example's values collected under a name (Collect / Collected), cleared per example.
  WeaveList& collected(const std::string& name);
  // Appends one row to a metric.
  void record_metric(const detail::BlockImpl* metric, loom::Value value, const Input* label);

  // Reads a computed value while weaving (a Loop's stop value). Only a batch running on the
  // flow engine has one; it returns the value's row, suspending the example's weave (a fiber,
  // flow_run.cpp) until the value is computed. An example dropped while suspended unwinds by
  // something thrown that is not a std::exception: let what you do not catch pass through.
  class Reader {
   public:
    virtual ~Reader() = default;
    virtual Tensor read(loom::Value value) = 0;
  };
  Reader* reader() const { return reader_; }
  void set_reader(Reader* reader) { reader_ = reader; }

 private:
  struct Caches;
  const detail::Compiled* compiled_;
  loom::Weaver* weaver_;
  detail::WovenRecords* records_;
  std::unique_ptr<Caches> caches_;
  std::int32_t example_ = 0;
  Reader* reader_ = nullptr;
};

// A short text of a user value for error messages (long values are cut).
std::string describe_input(const Input& value);

}  // namespace weft::blocks
WEFT_API_END
