// row_sparse.h - the operations on row_sparse arrays (array.h) that the C ABI and the stores
// share: casts between storage types, and moving rows between a dense array and a block.
//
// Every function works in host memory: row_sparse arrays live there by construction, and
// the dense arrays given here must too (NOT_SUPPORTED otherwise, naming the caller's
// `what`). Costs are stated per function; only the casts touch a whole dense array.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/array.h"

namespace kvstore {

// A new array of storage type `stype` (KV_STYPE_*) with the logical content of `src`:
// dense -> row_sparse keeps the rows with a non-zero element (NaN is non-zero, -0 is zero),
// row_sparse -> dense fills absent rows with zeros, same type -> a copy. Same shape, dtype
// and context. Throws INVALID_ARGUMENT (unknown stype, a rank-0 array to row_sparse),
// NOT_SUPPORTED (a non-CPU dense array to row_sparse), OUT_OF_MEMORY.
std::unique_ptr<Array> CastStorage(const Array& src, int stype);

// dense <- the logical content of row_sparse `src` (same shape and dtype, checked by the
// caller): zero-fills `dense`, then writes the stored rows. O(size of dense).
void DensifyInto(const Array& src, Array* dense);

// block[i] <- row ids[i] of `dense`, for n rows of dense.row_len() elements each, in
// dense's dtype. `block` is host memory; ids are in range (checked by the caller).
// O(n * row_len).
void GatherRows(const Array& dense, const int64_t* ids, int64_t n, void* block);

// Row ids[i] of `dense` <- block[i]: the inverse of GatherRows. O(n * row_len).
void ScatterRows(const void* block, const int64_t* ids, int64_t n, Array* dense);

// The sorted union of the row ids of row_sparse `arrays`. O(t log t) for t rows in all.
std::vector<int64_t> UnionRowIds(const std::vector<const Array*>& arrays);

// Throws NOT_SUPPORTED "<what>: ... host memory" unless `a` lives on the CPU.
void RequireHost(const Array& a, const char* what);

}  // namespace kvstore
