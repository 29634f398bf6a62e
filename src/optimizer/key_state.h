// key_state.h - the per-key state of a built-in optimizer and the table that holds it.
//
// State is transactional (UpdateTxn, updater.h): each key keeps its committed slots and a
// staging copy of the same size. An update reads the committed slots and writes the staging
// ones; the caller's commit swaps the two, its discard leaves the committed state as it
// was. So a push that fails on any key, or whose device copy back fails, moves no state.
// A lazy update of some rows (UpdateRows) stages only those rows: one block per slot of
// (rows staged) x row_len elements and the row ids; the commit copies the blocks into the
// committed slots, the discard drops them. Either way a key is staged once per transaction.
// State is kept in the compute type (float for float16/float32 weights, double for
// float64), created zeroed on the key's first update (dense or rows) in the size of its
// stored value.
//
// Multi-precision. Under an optimizer with multi_precision=1, a float16 key's state has
// one more float array after the optimizer's slots: the float32 master copy of the weight,
// created on the first update from the stored value (converted exactly). Updates compute on
// the master and store its float16 rounding, and both are committed together, so between
// updates the stored value is always the master rounded to float16 (round to nearest
// even). The master is state like any slot: staged, committed, discarded, saved.
// A key whose first update is a lazy one (UpdateRows) cannot take its master from the
// stored value, which that update does not see: its master starts "untaken", with a mask of
// one byte per element (1: the master value is current; 0: the master is the stored value,
// exactly converted, still to be taken). A lazy update takes the master of its rows from
// the rows it is given, a dense update takes every element still untaken, and the mask is
// released once every element is taken. Taking is no change of state (the value taken is
// what the master is by definition), so it happens outside any transaction. A saved key
// with an untaken master carries the mask as one more array (state_file.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/array.h"
#include "optimizer/kernels.h"
#include "optimizer/state_file.h"
#include "optimizer/updater.h"

namespace kvstore {
namespace optimizer {

// How errors name a key: 7 or "name".
std::string KeyName(int key, const char* str_key);

// The state of one key: the committed slots and a staging copy of each, and the number of
// committed updates (adam's t is steps + 1 for the next).
// Invariant: `staged` is true between an Update that staged this key and the end of its
// transaction; only that transaction commits or discards it. `mu` guards every field once
// the key is in its table (the store serialises a key's updates until commit; this makes
// it certain).
struct KeyState final : UpdateTxn::Staged {
  std::mutex mu;
  int dtype = 0;
  int64_t size = 0;
  int64_t steps = 0;
  bool staged = false;
  // Whether what is staged is a lazy update's row blocks (rf/rd, rows) rather than whole
  // staging copies (f[1]/d[1]). Meaningful while `staged`.
  bool staged_rows = false;
  // The index in `f` of the float32 master copy of a float16 weight under multi_precision
  // (the optimizer's slot count), or -1 when the key has none.
  int master = -1;
  std::vector<float> f[2][kMaxStateArrays];  // [0] committed, [1] staged
  std::vector<double> d[2][kMaxStateArrays];
  // A lazy update's staging: the row ids, the elements per row, and for each state array
  // in use (slots, then the master) a block of rows.size() * row_len elements, row j of the
  // block being row rows[j] of the array. The blocks keep their capacity between updates
  // (as much as the key's largest lazy update staged), so steady training allocates none.
  std::vector<int64_t> rows;
  int64_t row_len = 0;
  int row_arrays = 0;  // the state arrays staged in rf/rd (slots, then the master)
  std::vector<float> rf[kMaxStateArrays];
  std::vector<double> rd[kMaxStateArrays];
  // Multi-precision keys first updated lazily: the master's mask (see the top of the file),
  // and the number of its zero bytes. Empty (and 0) once the whole master is taken.
  std::vector<uint8_t> master_taken;
  int64_t master_missing = 0;

  void Commit() noexcept override;
  void Discard() noexcept override;

  // The slot pointers of the first `num_slots` slots, in compute type C (float or double).
  template <typename C> Slots<C> SlotsFor(int num_slots);
  // For a lazy update of `n` rows of `row_len` elements: sizes the staging blocks of the
  // `num_arrays` state arrays in use (the compute type is that of `dtype`) and records the
  // row ids. May throw std::bad_alloc (nothing is staged then). Requires `mu`.
  void StageRows(const int64_t* row_ids, int64_t n, int64_t len, int num_arrays);
  // The slot pointers of row j (0 <= j < rows.size()) of a staged lazy update: the
  // committed row rows[j] in, staging block row j out.
  template <typename C> Slots<C> RowSlotsFor(int num_slots, int64_t j);
  // Takes every untaken master element from `weight` (the stored value's float16 elements,
  // all `size` of them) and releases the mask. Requires `mu`; never throws.
  void TakeMaster(const uint16_t* weight) noexcept;

  // The committed state arrays, in slot order, each of shape {size}; none for integer
  // weights. Requires `mu`. The saved form of a key (state_file.h): a new kind of state
  // (another slot) is added here and in Restore, and the file format does not change.
  std::vector<StateArray> SavedArrays(int num_slots) const;
};
template <> Slots<float> KeyState::SlotsFor<float>(int num_slots);
template <> Slots<double> KeyState::SlotsFor<double>(int num_slots);
template <> Slots<float> KeyState::RowSlotsFor<float>(int num_slots, int64_t j);
template <> Slots<double> KeyState::RowSlotsFor<double>(int num_slots, int64_t j);

// The states of one optimizer instance, by int key or string key.
class StateTable {
 public:
  // `optimizer` names the optimizer in errors; `num_slots` is its NumSlots;
  // `multi_precision` gives float16 keys a master copy.
  StateTable(const char* optimizer, int num_slots, bool multi_precision)
      : optimizer_(optimizer), num_slots_(num_slots), multi_precision_(multi_precision) {}

  // The state of the key, created on first use for a stored value of `dtype` and `shape`:
  // zeroed slots, and for multi-precision
  // float16 keys the master copy, converted from `host_weight` (the stored value's elements
  // in host memory) or, when that is null (a lazy update's first), untaken. Throws
  // DTYPE_MISMATCH/SHAPE_MISMATCH when an existing state was made for another dtype or
  // size, std::bad_alloc when a new one cannot be allocated (no entry is left then).
  KeyState* Get(int key, const char* str_key, int dtype, const Shape& shape,
                const void* host_weight);

  // The committed state of every key that has one, keys ascending (ints, or strings in
  // byte order); the weight shape of each record is {size} (the store knows the real one).
  // The caller keeps updates out until it returns (no transaction may be open).
  std::vector<KeyRecord> Save();
  // Replaces every key's state with the records' (keys without a record get fresh state on
  // their next update, as if never updated). First checks each record against this
  // optimizer: `num_slots` arrays of the compute dtype of the record's weight dtype
  // (float32 for float16/float32, float64 for float64, none for integers; float16 weights
  // under multi_precision have the float32 master after the slots, and may have the uint8
  // mask of an untaken master after it, each byte 0 or 1), each with as many elements as
  // the weight; throws INVALID_ARGUMENT (naming `path`, the key and what
  // differs) or std::bad_alloc, with no state changed. The caller keeps updates out, as
  // for Save; the records are consumed.
  // With `apply` false everything but the replacement runs (a check).
  void Restore(std::vector<KeyRecord>* records, const std::string& path, bool apply = true);

 private:
  using StateKey = std::tuple<bool, int, std::string>;

  const char* const optimizer_;
  const int num_slots_;
  const bool multi_precision_;
  std::mutex mu_;  // guards the map, not the states in it
  std::map<StateKey, std::unique_ptr<KeyState>> states_;
};

}  // namespace optimizer
}  // namespace kvstore
