// test_row_sparse_dist.cc - row_sparse values on the dist stores (ps/row_sparse_worker.h,
// server.h "Rows"): every pulled bit equals the `local` store's given the same calls.
//
// The script (Drive): a (20, 3) float32 key is inited, then five rounds push row_sparse
// values (two values of overlapping rows; rows at both ends; a round mixing a dense and a
// row_sparse value, summed dense; a value with no row; rows in both halves), and after each
// round the worker pulls the key dense and row_sparse_pulls ids {19, 3, 3, 0, 10} (unsorted,
// duplicated). With two workers each pushes one value per round (rank 0 the first, rank 1
// the second), which the local store is given as one call in rank order. The updaters:
// assign, sgd with momentum and wd (lazy), adam (lazy), sgd lazy_update=0 (dense), and a
// callback updater (a row_sparse recv; the servers' is checked to have received one).
//
//   row_sparse_sync_one_worker_matches_local  dist_sync, W=1, S=1 and S=2 (the key split
//                        by rows over both servers: bigarray_bound 16), int key
//   row_sparse_async_one_worker_matches_local  the same on dist_async
//   row_sparse_device_sync_one_worker_matches_local  dist_device_sync, S=2, string key
//   row_sparse_sync_two_workers_match_local  dist_sync, W=2, S=2 split, string key (the
//                        mixed round is a server round of a dense and a row_sparse push)
//   row_sparse_errors_change_nothing  unknown key, ids out of range, a value of another
//                        shape or dtype, a row_sparse pushpull: precise errors, and the key
//                        still pulls its old value
//   row_sparse_wire_rules  ValidateHeader on kFlagRowSparse messages
//   row_sparse_pull_after_failed_push  a row_sparse push the servers' updater fails: the
//                        next row_sparse_pull of the key fails naming it (it cannot contain
//                        the push), WaitAll reports the push, and then pulls work again
//   row_sparse_float16_multi_precision_matches_local  float16 rows under multi_precision=1
//                        (lazy sgd, and a dense `test`): W=1, S=2, three values per call (the
//                        worker sends their float32 sum); W=2, S=2, rank 0 two values (a
//                        float32 sum), rank 1 one (float16), added in float32 on the servers
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cases.h"
#include "core/dtype.h"
#include "job.h"
#include "ps/wire.h"
#include "store/callback_updater.h"

namespace kvstore {
namespace inprocess {
namespace {

constexpr int64_t kRows = 20, kLen = 3;
const Shape kShape{kRows, kLen};

// What one round's pulls returned: the dense value, and the row_sparse pull's ids and rows.
struct Pulled {
  std::vector<float> dense;
  std::vector<int64_t> ids;
  std::vector<float> rows;
  bool operator==(const Pulled& o) const {
    return std::memcmp(dense.data(), o.dense.data(), dense.size() * 4) == 0 && dense.size() == o.dense.size() &&
           ids == o.ids && rows.size() == o.rows.size() &&
           std::memcmp(rows.data(), o.rows.data(), rows.size() * 4) == 0;
  }
};

std::unique_ptr<Array> Rsp(const std::vector<int64_t>& ids, float base) {
  std::unique_ptr<Array> a = Array::CreateRowSparse(kShape, KV_FLOAT32, Context{}, ids);
  auto* p = static_cast<float*>(a->data());
  for (int64_t i = 0; i < a->size(); ++i) p[i] = base + 0.37f * static_cast<float>(i % 7) - 0.11f * static_cast<float>(i);
  return a;
}

std::unique_ptr<Array> Dense(float base) {
  std::unique_ptr<Array> a = Array::Create(kShape, KV_FLOAT32, Context{});
  auto* p = static_cast<float*>(a->data());
  for (int64_t i = 0; i < a->size(); ++i) p[i] = base - 0.013f * static_cast<float>(i * i % 11);
  return a;
}

// The values of round r: W=1 pushes all of them in one call; with W=2 rank i pushes value i.
std::vector<std::unique_ptr<Array>> RoundValues(int r) {
  std::vector<std::unique_ptr<Array>> v;
  switch (r) {
    case 0: v.push_back(Rsp({1, 4, 7}, 0.5f)); v.push_back(Rsp({4, 9}, -1.25f)); break;
    case 1: v.push_back(Rsp({0, kRows - 1}, 2.0f)); v.push_back(Rsp({5}, 0.1f)); break;
    case 2: v.push_back(Dense(0.3f)); v.push_back(Rsp({2, 3}, 1.5f)); break;
    case 3: v.push_back(Rsp({}, 0.0f)); v.push_back(Rsp({}, 0.0f)); break;
    default: v.push_back(Rsp({2, kRows / 2, kRows - 2}, -0.7f)); v.push_back(Rsp({3, kRows / 2}, 0.9f)); break;
  }
  return v;
}
constexpr int kRounds = 5;

// The key of a script: an int or a string.
struct Key {
  bool is_str;
  int i;
  std::string s;
  KeyList List(int n, std::vector<int>* ints, std::vector<const char*>* strs) const {
    ints->assign(static_cast<size_t>(n), i);
    strs->assign(static_cast<size_t>(n), s.c_str());
    return is_str ? KeyList::Strs(n, strs->data()) : KeyList::Ints(n, ints->data());
  }
};

Pulled PullBoth(Store& s, const Key& key) {
  std::vector<int> ints;
  std::vector<const char*> strs;
  Pulled p;
  std::unique_ptr<Array> out = Array::Create(kShape, KV_FLOAT32, Context{});
  Array* o = out.get();
  s.Pull(key.List(1, &ints, &strs), &o, 0);
  p.dense = Values(*out);
  std::unique_ptr<Array> ids = Array::Create({5}, KV_INT64, Context{});
  const int64_t want[5] = {kRows - 1, 3, 3, 0, kRows / 2};
  std::memcpy(ids->data(), want, sizeof(want));
  std::unique_ptr<Array> rsp = Array::CreateRowSparse(kShape, KV_FLOAT32, Context{}, {1, 2});
  Array* r = rsp.get();
  const Array* id = ids.get();
  s.RowSparsePull(key.List(1, &ints, &strs), &r, &id, 0);
  p.ids = rsp->row_ids();
  const auto* d = static_cast<const float*>(rsp->data());
  p.rows.assign(d, d + rsp->size());
  return p;
}

// Runs the script as worker `rank` of `workers` (the local store: rank 0 of 1 with every
// value) and returns each round's pulls.
std::vector<Pulled> Drive(Store& s, const Key& key, int rank, int workers) {
  std::vector<int> ints;
  std::vector<const char*> strs;
  std::unique_ptr<Array> w0 = Dense(1.0f);
  const Array* v0 = w0.get();
  s.Init(key.List(1, &ints, &strs), &v0);
  std::vector<Pulled> out;
  for (int r = 0; r < kRounds; ++r) {
    std::vector<std::unique_ptr<Array>> vals = RoundValues(r);
    std::vector<const Array*> mine;
    for (size_t i = 0; i < vals.size(); ++i) {
      if (workers == 1 || static_cast<int>(i) == rank) mine.push_back(vals[i].get());
    }
    s.Push(key.List(static_cast<int>(mine.size()), &ints, &strs), mine.data(), 0);
    out.push_back(PullBoth(s, key));
  }
  return out;
}

// The callback updater: for a row_sparse recv each pushed row becomes 0.5 * row + 3 * recv;
// for a dense recv every element does. Counts the row_sparse recvs it saw.
std::atomic<int> g_rsp_recvs{0};
int HalfAndAdd(int, KVArrayHandle recv, KVArrayHandle stored, void*) {
  auto* s = static_cast<float*>(stored->data());
  const auto* g = static_cast<const float*>(recv->data());
  if (!recv->is_row_sparse()) {
    for (int64_t i = 0; i < stored->size(); ++i) s[i] = 0.5f * s[i] + 3.0f * g[i];
    return 0;
  }
  g_rsp_recvs.fetch_add(1);
  const int64_t len = recv->row_len();
  for (int64_t j = 0; j < recv->num_rows(); ++j) {
    for (int64_t e = 0; e < len; ++e) {
      float& x = s[recv->row_ids()[static_cast<size_t>(j)] * len + e];
      x = 0.5f * x + 3.0f * g[j * len + e];
    }
  }
  return 0;
}

const char* const kUpdaters[] = {"", "sgd(lr=0.1,momentum=0.9,wd=0.01)", "adam(lr=0.01)",
                                  "sgd(lr=0.1,lazy_update=0)", "callback"};

void SetUpdater(Store& s, const std::string& u) {
  if (u == "callback") s.SetUpdater(MakeCallbackUpdater(HalfAndAdd, nullptr, nullptr));
  else if (!u.empty()) s.SetOptimizer(u);
}

std::vector<Pulled> DriveLocal(const std::string& updater, const Key& key) {
  std::unique_ptr<Store> local = CreateStore("local");
  SetUpdater(*local, updater);
  return Drive(*local, key, 0, 1);
}

void CheckRounds(const std::vector<Pulled>& got, const std::vector<Pulled>& want, const std::string& what) {
  CHECK_MSG(got.size() == want.size(), "%s: %zu rounds, %zu expected", what.c_str(), got.size(), want.size());
  for (size_t r = 0; r < got.size() && r < want.size(); ++r) {
    CHECK_MSG(got[r] == want[r], "%s: round %zu differs from the local store", what.c_str(), r);
  }
  if (!want.empty()) {
    CHECK(want.back().ids == (std::vector<int64_t>{0, 3, kRows / 2, kRows - 1}));
  }
}

// Runs the script on a job and checks it against the local store, for every updater.
void CheckJob(const std::string& type, int workers, int servers, const Key& key) {
  for (const char* updater : kUpdaters) {
    const std::string u = updater;
    const std::string what = type + " W=" + std::to_string(workers) + " S=" + std::to_string(servers) +
                             " updater '" + u + "'";
    Job::Options o;
    o.type = type;
    o.num_workers = workers;
    o.num_servers = servers;
    o.bigarray_bound = 16;  // the (20, 3) key is split by rows over every server
    if (u == "callback") {
      o.server_hooks = [](int, dist::ServerHooks* h) { h->updater = MakeCallbackUpdater(HalfAndAdd, nullptr, nullptr); };
    }
    g_rsp_recvs = 0;
    Job job(o);
    CHECK(job.formed());
    if (!job.formed()) return;
    std::vector<std::vector<Pulled>> got(static_cast<size_t>(workers));
    job.OnEachWorker("row_sparse rounds", [&](int rank, Store& s) {
      if (rank == 0 && u != "callback") SetUpdater(s, u);
      s.distributed()->Barrier();
      got[static_cast<size_t>(rank)] = Drive(s, key, rank, workers);
    });
    CHECK_JOB_OK(job.Finish());
    if (u == "callback") CHECK_MSG(g_rsp_recvs.load() > 0, "%s: no row_sparse recv on the servers", what.c_str());
    const int seen = g_rsp_recvs.load();
    const std::vector<Pulled> want = DriveLocal(u, key);
    (void)seen;
    for (int w = 0; w < workers; ++w) CheckRounds(got[static_cast<size_t>(w)], want, what + " worker " + std::to_string(w));
  }
}

void SyncOneWorkerMatchesLocal() {
  CheckJob("dist_sync", 1, 1, {false, 3, ""});
  CheckJob("dist_sync", 1, 2, {false, 3, ""});
}

void AsyncOneWorkerMatchesLocal() {
  CheckJob("dist_async", 1, 1, {false, 4, ""});
  CheckJob("dist_async", 1, 2, {false, 4, ""});
}

void DeviceSyncOneWorkerMatchesLocal() { CheckJob("dist_device_sync", 1, 2, {true, 0, "embedding"}); }

void SyncTwoWorkersMatchLocal() { CheckJob("dist_sync", 2, 2, {true, 0, "embedding"}); }

void ErrorsChangeNothing() {
  Job::Options o;
  o.num_servers = 2;
  o.bigarray_bound = 16;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  job.OnEachWorker("errors", [&](int, Store& s) {
    const Key key{false, 1, ""};
    std::unique_ptr<Array> w0 = Dense(1.0f);
    InitKey(s, 1, *w0);
    const Pulled before = PullBoth(s, key);
    std::string msg;
    // Unknown key: push and row_sparse_pull.
    std::unique_ptr<Array> v = Rsp({2}, 1.0f);
    CHECK(ErrorOf([&] { PushKey(s, 9, *v); }, &msg) == KV_ERR_UNKNOWN_KEY);
    CHECK_HAS(msg, "key 9");
    std::unique_ptr<Array> ids = Array::Create({2}, KV_INT64, Context{});
    std::unique_ptr<Array> out = Array::CreateRowSparse(kShape, KV_FLOAT32, Context{}, {1});
    const Array* id = ids.get();
    Array* o1 = out.get();
    const int nine = 9, one = 1;
    CHECK(ErrorOf([&] { s.RowSparsePull(KeyList::Ints(1, &nine), &o1, &id, 0); }, &msg) == KV_ERR_UNKNOWN_KEY);
    // Ids out of range: refused, the output keeps its row.
    const int64_t bad[2] = {3, kRows};
    std::memcpy(ids->data(), bad, sizeof(bad));
    CHECK(ErrorOf([&] { s.RowSparsePull(KeyList::Ints(1, &one), &o1, &id, 0); }, &msg) == KV_ERR_INVALID_ARGUMENT);
    CHECK_HAS(msg, "outside [0, 20)");
    CHECK(out->row_ids() == std::vector<int64_t>{1});
    // A value or an output of another shape or dtype.
    std::unique_ptr<Array> wide = Array::CreateRowSparse({kRows, kLen + 1}, KV_FLOAT32, Context{}, {0});
    CHECK(ErrorOf([&] { PushKey(s, 1, *wide); }, &msg) == KV_ERR_SHAPE_MISMATCH);
    CHECK_HAS(msg, "(20,4)");
    std::unique_ptr<Array> f64 = Array::CreateRowSparse(kShape, KV_FLOAT64, Context{}, {0});
    CHECK(ErrorOf([&] { PushKey(s, 1, *f64); }, &msg) == KV_ERR_DTYPE_MISMATCH);
    Array* o2 = wide.get();
    const int64_t good[2] = {3, 4};
    std::memcpy(ids->data(), good, sizeof(good));
    CHECK(ErrorOf([&] { s.RowSparsePull(KeyList::Ints(1, &one), &o2, &id, 0); }, &msg) == KV_ERR_SHAPE_MISMATCH);
    // A row_sparse pushpull.
    const Array* pv = v.get();
    std::unique_ptr<Array> dense_out = Array::Create(kShape, KV_FLOAT32, Context{});
    Array* po = dense_out.get();
    CHECK(ErrorOf([&] { s.PushPull(KeyList::Ints(1, &one), &pv, KeyList::Ints(1, &one), &po, 0); }, &msg) ==
          KV_ERR_NOT_SUPPORTED);
    CHECK_HAS(msg, "dist_sync");
    s.WaitAll();
    CHECK(PullBoth(s, key) == before);
  });
  CHECK_JOB_OK(job.Finish());
}

void WireRowsRules() {
  using dist::WireHeader;
  auto header = [](dist::MsgType type, uint32_t flags, int32_t len, int64_t offset, int64_t count) {
    WireHeader h = dist::MakeHeader(type, dist::Role::kWorker, 0);
    h.flags = flags | dist::kFlagRowSparse;
    h.arg = len;
    h.dtype = KV_FLOAT32;
    h.key = 1;
    h.total = 60;
    h.offset = offset;
    h.count = count;
    return h;
  };
  auto why = [](WireHeader h, uint64_t payload) {
    h.payload_len = payload;
    h.num_frames = payload > 0 ? 2 : 1;
    return dist::ValidateHeader(h, payload > 0 ? 1 : 0, 0, payload);
  };
  using dist::MsgType;
  CHECK(why(header(MsgType::kPush, 0, 3, 30, 30), 2 * (8 + 12)).empty());   // 2 rows
  CHECK(why(header(MsgType::kPush, 0, 3, 30, 30), 0).empty());              // no row
  CHECK(why(header(MsgType::kPull, 0, 3, 0, 30), 3 * 8).empty());           // 3 ids
  CHECK_HAS(why(header(MsgType::kPush, 0, 3, 30, 30), 2 * (8 + 12) + 4), "whole number of rows");
  CHECK_HAS(why(header(MsgType::kPush, 0, 3, 30, 30), 11 * (8 + 12)), "more rows than the part");
  CHECK(why(header(MsgType::kPull, 0, 3, 0, 30), 0).empty());               // no id
  CHECK_HAS(why(header(MsgType::kPull, 0, 3, 0, 30), 12), "whole number of rows");
  CHECK_HAS(why(header(MsgType::kPush, 0, 0, 30, 30), 0), "row length");
  CHECK_HAS(why(header(MsgType::kPush, 0, -3, 30, 30), 0), "row length");
  CHECK_HAS(why(header(MsgType::kPush, 0, 4, 30, 30), 0), "whole rows");
  CHECK_HAS(why(header(MsgType::kPushPull, 0, 3, 30, 30), 0), "only a push or pull");
  CHECK_HAS(why(header(MsgType::kInit, 0, 3, 30, 30), 0), "only a push or pull");
  CHECK_HAS(why(header(MsgType::kPush, dist::kFlagTwoBit, 3, 30, 30), 0), "not compressed");
  WireHeader cmd = header(MsgType::kCommand, 0, 3, 0, 0);
  CHECK_HAS(why(cmd, 0), "row flag");
  // A float32 sum of a float16 key: rows of float32.
  WireHeader f16 = header(MsgType::kPush, dist::kFlagFloat32Sum, 3, 30, 30);
  f16.dtype = KV_FLOAT16;
  CHECK(why(f16, 8 + 12).empty());
  CHECK_HAS(why(f16, 8 + 6), "whole number of rows");
}

// float16 rows whose float16 sums would round (2048 + 1 + 1 is 2048 in float16).
std::unique_ptr<Array> HalfRsp(const std::vector<int64_t>& ids, float base, int r) {
  std::unique_ptr<Array> a = Array::CreateRowSparse(kShape, KV_FLOAT16, Context{}, ids);
  auto* p = static_cast<uint16_t*>(a->data());
  for (int64_t i = 0; i < a->size(); ++i) p[i] = FloatToHalf(base + 0.25f * static_cast<float>((i + r) % 5));
  return a;
}

// Rounds of three float16 values; W=1 pushes them in one call, with W=2 rank 0 pushes the
// first two and rank 1 the third. Returns the dense pulls' bits.
std::vector<std::vector<uint16_t>> DriveHalf(Store& s, const std::string& spec, int rank, int workers) {
  if (rank == 0) s.SetOptimizer(spec);
  if (workers > 1) s.distributed()->Barrier();
  std::unique_ptr<Array> w0 = Array::Create(kShape, KV_FLOAT16, Context{});
  InitKey(s, 5, *w0);
  std::vector<std::vector<uint16_t>> pulled;
  for (int r = 0; r < 4; ++r) {
    std::vector<std::unique_ptr<Array>> vals;
    vals.push_back(HalfRsp({1, 4, 7 + r}, 2048.0f, r));
    vals.push_back(HalfRsp({4, 7 + r, 15}, 1.0f, r));
    vals.push_back(HalfRsp({0, 4, 15}, 1.0f, r + 1));
    std::vector<const Array*> mine;
    for (size_t i = 0; i < vals.size(); ++i) {
      if (workers == 1 || (rank == 0 && i < 2) || (rank == 1 && i == 2)) mine.push_back(vals[i].get());
    }
    const std::vector<int> keys(mine.size(), 5);
    s.Push(KeyList::Ints(static_cast<int>(keys.size()), keys.data()), mine.data(), 0);
    std::unique_ptr<Array> out = Array::Create(kShape, KV_FLOAT16, Context{});
    PullKey(s, 5, out.get());
    out->WaitPendingWrites();
    const auto* p = static_cast<const uint16_t*>(out->data());
    pulled.emplace_back(p, p + out->size());
  }
  return pulled;
}

void Float16MultiPrecisionMatchesLocal() {
  for (const char* spec : {"sgd(lr=0.1,momentum=0.9,multi_precision=1)", "test(multi_precision=1)"}) {
    std::unique_ptr<Store> local = CreateStore("local");
    const std::vector<std::vector<uint16_t>> want = DriveHalf(*local, spec, 0, 1);
    for (int workers = 1; workers <= 2; ++workers) {
      Job::Options o;
      o.num_workers = workers;
      o.num_servers = 2;
      o.bigarray_bound = 16;
      Job job(o);
      CHECK(job.formed());
      if (!job.formed()) return;
      std::vector<std::vector<std::vector<uint16_t>>> got(static_cast<size_t>(workers));
      job.OnEachWorker("float16 rows", [&](int rank, Store& s) { got[static_cast<size_t>(rank)] = DriveHalf(s, spec, rank, workers); });
      CHECK_JOB_OK(job.Finish());
      for (const auto& g : got) CHECK_MSG(g == want, "%s, W=%d: the pulled bits differ from the local store's", spec, workers);
    }
  }
}

std::atomic<bool> g_fail_updates{false};
int FailWhenAsked(int key, KVArrayHandle recv, KVArrayHandle stored, void* u) {
  if (g_fail_updates.load()) return 1;
  return HalfAndAdd(key, recv, stored, u);
}

void PullAfterFailedPush() {
  Job::Options o;
  o.num_servers = 2;
  o.bigarray_bound = 16;
  o.server_hooks = [](int, dist::ServerHooks* h) { h->updater = MakeCallbackUpdater(FailWhenAsked, nullptr, nullptr); };
  g_fail_updates = false;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  job.OnEachWorker("pull after a failed push", [&](int, Store& s) {
    const Key key{false, 2, ""};
    std::unique_ptr<Array> w0 = Dense(1.0f);
    InitKey(s, 2, *w0);
    std::unique_ptr<Array> v = Rsp({3, 15}, 1.0f);
    PushKey(s, 2, *v);
    const Pulled before = PullBoth(s, key);
    g_fail_updates = true;
    PushKey(s, 2, *v);
    std::string msg;
    std::unique_ptr<Array> ids = Array::Create({1}, KV_INT64, Context{});
    std::unique_ptr<Array> out = Array::CreateRowSparse(kShape, KV_FLOAT32, Context{}, {});
    const Array* id = ids.get();
    Array* o1 = out.get();
    const int two = 2;
    CHECK(ErrorOf([&] { s.RowSparsePull(KeyList::Ints(1, &two), &o1, &id, 0); }, &msg) == KV_ERR_CALLBACK);
    CHECK_HAS(msg, "follows a failed push");
    CHECK(out->num_rows() == 0);
    CHECK(ErrorOf([&] { s.WaitAll(); }, &msg) == KV_ERR_CALLBACK);
    CHECK_HAS(msg, "key 2");
    g_fail_updates = false;
    CHECK(PullBoth(s, key) == before);
  });
  CHECK_JOB_OK(job.Finish());
}

const Case kCases[] = {
    {"row_sparse_sync_one_worker_matches_local", SyncOneWorkerMatchesLocal},
    {"row_sparse_async_one_worker_matches_local", AsyncOneWorkerMatchesLocal},
    {"row_sparse_device_sync_one_worker_matches_local", DeviceSyncOneWorkerMatchesLocal},
    {"row_sparse_sync_two_workers_match_local", SyncTwoWorkersMatchLocal},
    {"row_sparse_errors_change_nothing", ErrorsChangeNothing},
    {"row_sparse_wire_rules", WireRowsRules},
    {"row_sparse_pull_after_failed_push", PullAfterFailedPush},
    {"row_sparse_float16_multi_precision_matches_local", Float16MultiPrecisionMatchesLocal},
};

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::inprocess::RunCases(argc, argv, kvstore::inprocess::kCases); }
