// row_sparse.cc - the C ABI of row_sparse arrays (kvstore.h "Row-sparse arrays"): creating
// one, reading its storage type and row ids, casting between storage types; and
// KVStoreRowSparsePull. The shims
// follow c_api.cc: arguments checked, handles entered, everything inside Guard.
#include <vector>

#include "c_api/call_arrays.h"
#include "c_api/guard.h"
#include "core/row_sparse.h"
#include "kvstore/kvstore.h"

using kvstore::Array;
using kvstore::capi::EnterArray;
using kvstore::capi::Guard;
using kvstore::capi::InCall;

namespace {

const Array& RowSparseArg(const Array& a, const char* what) {
  KV_CHECK(a.is_row_sparse(), KV_ERR_INVALID_ARGUMENT, "%s: array %s is dense, not row_sparse", what,
           a.Describe().c_str());
  return a;
}

}  // namespace

extern "C" {

int KVArrayCreateRowSparse(const int64_t* shape, int ndim, int dtype, int dev_type, int dev_id,
                           const int64_t* row_ids, int64_t num_rows, KVArrayHandle* out) {
  return Guard([&] {
    KV_REQUIRE(out, "out");
    KV_CHECK(ndim >= 1 && ndim <= KV_MAX_NDIM, KV_ERR_INVALID_ARGUMENT,
             "KVArrayCreateRowSparse: ndim %d is outside [1, %d] (a row_sparse array has rows)", ndim,
             KV_MAX_NDIM);
    KV_REQUIRE(shape, "shape");
    KV_CHECK(num_rows >= 0 && (shape[0] < 0 || num_rows <= shape[0]), KV_ERR_INVALID_ARGUMENT,
             "KVArrayCreateRowSparse: num_rows %lld is outside [0, %lld] (the rows of the shape)",
             static_cast<long long>(num_rows), static_cast<long long>(shape[0]));
    KV_CHECK(num_rows == 0 || row_ids != nullptr, KV_ERR_NULL_POINTER, "row_ids is NULL with num_rows %lld",
             static_cast<long long>(num_rows));
    std::vector<int64_t> ids(row_ids, row_ids + num_rows);
    std::unique_ptr<Array> a = Array::CreateRowSparse(kvstore::Shape(shape, shape + ndim), dtype,
                                                      kvstore::Context{dev_type, dev_id}, std::move(ids));
    a->set_caller_owned();
    *out = a.release();
  });
}

int KVArrayGetStorageType(KVArrayHandle array, int* out_stype) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_REQUIRE(out_stype, "out_stype");
    *out_stype = array->stype();
  });
}

int KVArrayGetNumRows(KVArrayHandle array, int64_t* out_num_rows) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    KV_REQUIRE(out_num_rows, "out_num_rows");
    *out_num_rows = RowSparseArg(*array, "KVArrayGetNumRows").num_rows();
  });
}

int KVArrayGetRowIds(KVArrayHandle array, int64_t* out_ids, int64_t capacity) {
  return Guard([&] {
    const InCall in_call = EnterArray(array, "array");
    const std::vector<int64_t>& ids = RowSparseArg(*array, "KVArrayGetRowIds").row_ids();
    KV_CHECK(capacity >= array->num_rows(), KV_ERR_INVALID_ARGUMENT,
             "KVArrayGetRowIds: capacity %lld is smaller than the %lld rows of %s", static_cast<long long>(capacity),
             static_cast<long long>(array->num_rows()), array->Describe().c_str());
    if (ids.empty()) return;
    KV_REQUIRE(out_ids, "out_ids");
    std::copy(ids.begin(), ids.end(), out_ids);
  });
}

int KVArrayCastStorage(KVArrayHandle src, int stype, KVArrayHandle* out) {
  return Guard([&] {
    const InCall in_call = EnterArray(src, "src");
    KV_REQUIRE(out, "out");
    src->WaitPendingWrites();
    std::unique_ptr<Array> a = kvstore::CastStorage(*src, stype);
    a->set_caller_owned();
    *out = a.release();
  });
}

}  // extern "C"

namespace {

int StoreRowSparsePull(KVStoreHandle store, const kvstore::KeyList& keys, const KVArrayHandle* outs,
                       const KVArrayHandle* row_ids) {
  return Guard([&] {
    const InCall in_call = kvstore::capi::EnterStore(store);
    kvstore::capi::CallArrays o = kvstore::capi::CheckList(keys, outs, "row_sparse_pull", true);
    kvstore::capi::CallArrays r = kvstore::capi::CheckList(keys, row_ids, "row_sparse_pull row_ids");
    for (int i = 0; i < keys.size; ++i) {
      KV_CHECK(o.arrays[i]->is_row_sparse(), KV_ERR_INVALID_ARGUMENT,
               "row_sparse_pull: output %d (key %s) is %s, not row_sparse (create it with "
               "KVArrayCreateRowSparse)", i, keys.Name(i).c_str(), o.arrays[i]->Describe().c_str());
      KV_CHECK(!r.arrays[i]->is_row_sparse(), KV_ERR_INVALID_ARGUMENT,
               "row_sparse_pull: row_ids %d (key %s) is row_sparse; row ids are a dense array", i,
               keys.Name(i).c_str());
    }
    store->RowSparsePull(keys, o.data(), r.data(), 0);
  });
}

}  // namespace

extern "C" {

int KVStoreRowSparsePull(KVStoreHandle store, int num, const int* keys, const KVArrayHandle* outs,
                         const KVArrayHandle* row_ids, int priority) {
  (void)priority;
  return StoreRowSparsePull(store, kvstore::KeyList::Ints(num, keys), outs, row_ids);
}

int KVStoreRowSparsePullStr(KVStoreHandle store, int num, const char* const* keys, const KVArrayHandle* outs,
                            const KVArrayHandle* row_ids, int priority) {
  (void)priority;
  return StoreRowSparsePull(store, kvstore::KeyList::Strs(num, keys), outs, row_ids);
}

}  // extern "C"
