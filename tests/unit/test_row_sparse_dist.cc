// test_row_sparse_dist.cc - until the distributed stores take row_sparse values, a dist_sync
// and a dist_async worker say so precisely: they do not take row_sparse values (c_api then
// refuses init, push, pushpull and broadcast of one with NOT_SUPPORTED naming the store
// type), and row_sparse_pull fails with NOT_SUPPORTED naming the type. A job in process
// (tests/inprocess/job.h), the worker store driven directly.
#include <memory>
#include <string>

#include "../inprocess/cases.h"
#include "../inprocess/job.h"
#include "core/array.h"

namespace kvstore {
namespace inprocess {
namespace {

void DistRefusesRowSparse() {
  for (const char* type : {"dist_sync", "dist_async"}) {
    Job::Options o;
    o.type = type;
    Job job(o);
    CHECK(job.formed());
    if (!job.formed()) return;
    Store& s = *job.worker(0);
    CHECK_MSG(!s.takes_row_sparse(), "%s takes row_sparse values", type);
    int key = 3;
    std::unique_ptr<Array> value = Array::Create({4, 2}, KV_FLOAT32, Context{});
    const Array* init[1] = {value.get()};
    s.Init(KeyList::Ints(1, &key), init);
    std::unique_ptr<Array> out = Array::CreateRowSparse({4, 2}, KV_FLOAT32, Context{}, {});
    std::unique_ptr<Array> ids = Array::Create({1}, KV_INT64, Context{});
    Array* outs[1] = {out.get()};
    const Array* row_ids[1] = {ids.get()};
    std::string message;
    int code = 0;
    try {
      s.RowSparsePull(KeyList::Ints(1, &key), outs, row_ids, 0);
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    }
    CHECK_MSG(code == KV_ERR_NOT_SUPPORTED, "%s: row_sparse_pull gave code %d", type, code);
    CHECK_HAS(message, "row_sparse_pull");
    CHECK_HAS(message, type);
    CHECK(out->num_rows() == 0);
    CHECK_JOB_OK(job.Finish());
  }
}

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) {
  static const kvstore::inprocess::Case cases[] = {{"dist_refuses_row_sparse", kvstore::inprocess::DistRefusesRowSparse}};
  return kvstore::inprocess::RunCases(argc, argv, cases);
}
