// test_worker_keys.cc - the worker's key registry (src/ps/worker_keys.h) and the optimizer
// states code that reads it (src/ps/dist_states.h), without sockets: records found by the
// keys of a call, int and string keys apart; a states file cut into the servers' parts and
// joined back to itself through the registry's placement; a record of the other key kind
// refused as a kind mismatch, an unknown key as unknown, on load and on save.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kvstore/kvstore.h"
#include "ps/dist_states.h"
#include "ps/placement.h"
#include "ps/worker_keys.h"

extern "C" {
#include "../common/check.h"
}

using kvstore::Error;
using kvstore::dist::WorkerKey;
using kvstore::dist::WorkerKeys;
namespace opt = kvstore::optimizer;

namespace {

constexpr int kServers = 2;
constexpr int64_t kBound = 8;  // values of more elements are cut over the servers

// Files a float32 key of `shape` as WorkerStore::AddKeys does.
WorkerKey* Add(WorkerKeys* keys, bool is_str, int64_t key, const std::string& name,
               const kvstore::Shape& shape) {
  static uint64_t order = 1;
  WorkerKey* k = keys->Insert(is_str, key, name);
  k->display = k->id.Display();
  k->order_id = order++;
  k->shape = shape;
  k->dtype = KV_FLOAT32;
  k->size = kvstore::ShapeSize(shape);
  k->nbytes = static_cast<size_t>(k->size) * sizeof(float);
  k->parts = k->id.Parts(k->size, kServers, kBound, kvstore::dist::PlacementRowLen(shape));
  return k;
}

// A record of the key's whole state: one float32 array, element e = base + e.
opt::KeyRecord Record(bool is_str, int key, const std::string& name, const kvstore::Shape& shape,
                      float base, int64_t steps) {
  opt::KeyRecord r;
  r.is_str = is_str;
  r.key = key;
  r.str_key = name;
  r.dtype = KV_FLOAT32;
  r.shape = shape;
  r.steps = steps;
  opt::StateArray a;
  a.dtype = KV_FLOAT32;
  a.shape = shape;
  const int64_t n = kvstore::ShapeSize(shape);
  a.bytes.resize(static_cast<size_t>(n) * sizeof(float));
  for (int64_t e = 0; e < n; ++e) {
    const float v = base + static_cast<float>(e);
    std::memcpy(a.bytes.data() + e * static_cast<int64_t>(sizeof(float)), &v, sizeof(v));
  }
  r.arrays.push_back(a);
  return r;
}

bool SameRecords(const opt::StatesFile& a, const opt::StatesFile& b) {
  if (a.optimizer != b.optimizer || a.spec != b.spec || a.keys.size() != b.keys.size()) return false;
  for (size_t i = 0; i < a.keys.size(); ++i) {
    const opt::KeyRecord& x = a.keys[i];
    const opt::KeyRecord& y = b.keys[i];
    if (x.is_str != y.is_str || x.key != y.key || x.str_key != y.str_key || x.dtype != y.dtype ||
        x.shape != y.shape || x.steps != y.steps || x.arrays.size() != y.arrays.size()) {
      return false;
    }
    for (size_t j = 0; j < x.arrays.size(); ++j) {
      if (x.arrays[j].shape != y.arrays[j].shape || x.arrays[j].bytes != y.arrays[j].bytes) return false;
    }
  }
  return true;
}

// The error code `f` throws, or 0.
template <typename F>
int CodeOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return 0;
}

// 100,000 int keys and as many string keys in two registries: each call key finds its own
// record, an int key never finds a string key of the same digits, records never move.
void test_registry_finds_every_key() {
  WorkerKeys ints, strs;
  std::vector<WorkerKey*> iv, sv;
  for (int i = 0; i < 100000; ++i) iv.push_back(Add(&ints, false, i, "", {1}));
  for (int i = 0; i < 100000; ++i) sv.push_back(Add(&strs, true, 0, std::to_string(i), {1}));
  int wrong = 0;
  for (int i = 0; i < 100000; ++i) {
    const std::string name = std::to_string(i);
    wrong += ints.FindInt(i) != iv[static_cast<size_t>(i)];
    wrong += strs.FindStr(name.c_str()) != sv[static_cast<size_t>(i)];
    wrong += ints.FindStr(name) != nullptr || strs.FindInt(i) != nullptr;
  }
  CHECK_MSG(wrong == 0, "%d lookups wrong", wrong);
  CHECK(ints.FindInt(100000) == nullptr && strs.FindStr("100000") == nullptr && strs.FindStr("") == nullptr);
  CHECK(ints.CountOf(false) == 100000 && ints.CountOf(true) == 0 && strs.CountOf(true) == 100000);
}

// Save after load sees the same file: SplitForServers cuts each record by the registry's
// parts (keys of 20 elements over both servers, small keys whole on one), each server's
// payload decodes as its SAVE_STATES reply would, and JoinServerStates joins them back.
void RoundTrip(bool is_str) {
  WorkerKeys keys;
  opt::StatesFile file;
  file.optimizer = "adam";
  file.spec = "adam(lr=0.1)";
  const char* names[] = {"a", "b", "c", "d"};
  const kvstore::Shape shapes[] = {{20}, {3}, {4, 5}, {1}};
  for (int i = 0; i < 4; ++i) {
    Add(&keys, is_str, is_str ? 0 : 3 * i + 1, is_str ? names[i] : "", shapes[i]);
    file.keys.push_back(Record(is_str, is_str ? 0 : 3 * i + 1, is_str ? names[i] : "", shapes[i],
                               100.0f * static_cast<float>(i), 7 + i));
  }
  const WorkerKey* split = is_str ? keys.FindStr("a") : keys.FindInt(1);
  CHECK(split != nullptr && split->parts.size() == 2);
  CHECK(CodeOf([&] { kvstore::dist::CheckStatesAgainstKeys(file, keys, "f"); }) == 0);
  const std::vector<std::string> payloads = kvstore::dist::SplitForServers(file, keys, kServers);
  CHECK(payloads.size() == 2);
  size_t pieces = 0, parts = 0;
  for (const std::string& p : payloads) pieces += opt::DecodeStatesFile(p, "payload").keys.size();
  keys.ForEach([&](const WorkerKey& k) { parts += k.parts.size(); });
  CHECK(parts >= 5 && pieces == parts);  // a piece per part; the split key's two at least
  opt::StatesFile joined;
  CHECK(CodeOf([&] { joined = kvstore::dist::JoinServerStates(payloads, keys); }) == 0);
  CHECK(SameRecords(joined, file));
}
void test_split_and_join_round_trip_int_keys() { RoundTrip(false); }
void test_split_and_join_round_trip_string_keys() { RoundTrip(true); }

// Load: a record of the other kind is a kind mismatch, an unknown key of the store's kind is
// unknown, any record against an empty registry is unknown; a wrong shape is a shape mismatch.
void test_check_refuses_other_kind_and_unknown_keys() {
  WorkerKeys ints, strs, none;
  Add(&ints, false, 3, "", {4});
  Add(&strs, true, 0, "w", {4});
  auto check = [](const WorkerKeys& keys, const opt::KeyRecord& r) {
    opt::StatesFile f;
    f.keys.push_back(r);
    return CodeOf([&] { kvstore::dist::CheckStatesAgainstKeys(f, keys, "f"); });
  };
  CHECK(check(ints, Record(false, 3, "", {4}, 0, 1)) == 0);
  CHECK(check(ints, Record(true, 0, "w", {4}, 0, 1)) == KV_ERR_KEY_KIND_MISMATCH);
  CHECK(check(ints, Record(false, 4, "", {4}, 0, 1)) == KV_ERR_UNKNOWN_KEY);
  CHECK(check(ints, Record(false, 3, "", {2, 2}, 0, 1)) == KV_ERR_SHAPE_MISMATCH);
  CHECK(check(strs, Record(true, 0, "w", {4}, 0, 1)) == 0);
  CHECK(check(strs, Record(false, 3, "", {4}, 0, 1)) == KV_ERR_KEY_KIND_MISMATCH);
  CHECK(check(strs, Record(true, 0, "v", {4}, 0, 1)) == KV_ERR_UNKNOWN_KEY);
  CHECK(check(none, Record(false, 3, "", {4}, 0, 1)) == KV_ERR_UNKNOWN_KEY);
  CHECK(check(none, Record(true, 0, "w", {4}, 0, 1)) == KV_ERR_UNKNOWN_KEY);
}

// Save: a server's state of a key the worker never initialised is UNKNOWN_KEY; a key with
// state on only one of the two servers that hold its parts is INTERNAL.
void test_join_refuses_unknown_and_partial_keys() {
  WorkerKeys keys;
  Add(&keys, false, 1, "", {20});  // cut over both servers
  opt::StatesFile reply;
  reply.optimizer = "sgd";
  reply.spec = "sgd(lr=0.1)";
  opt::StatesFile other = reply;
  other.keys.push_back(Record(false, 42, "", {1}, 0, 1));
  std::vector<std::string> payloads = {opt::EncodeStatesFile(reply), opt::EncodeStatesFile(other)};
  CHECK(CodeOf([&] { kvstore::dist::JoinServerStates(payloads, keys); }) == KV_ERR_UNKNOWN_KEY);
  const WorkerKey* k = keys.FindInt(1);
  const kvstore::dist::PartPlan& p0 = k->parts[0];
  opt::StatesFile one = reply;
  one.keys.push_back(Record(false, 1, "", {p0.count}, 0, 1));
  payloads.assign(kServers, opt::EncodeStatesFile(reply));
  payloads[static_cast<size_t>(p0.server)] = opt::EncodeStatesFile(one);
  CHECK(CodeOf([&] { kvstore::dist::JoinServerStates(payloads, keys); }) == KV_ERR_INTERNAL);
}

}  // namespace

int main() {
  test_registry_finds_every_key();
  test_split_and_join_round_trip_int_keys();
  test_split_and_join_round_trip_string_keys();
  test_check_refuses_other_kind_and_unknown_keys();
  test_join_refuses_unknown_and_partial_keys();
  return check_summary();
}
