// test_key_table.cc - the server's table of key parts (src/ps/key_table.h): int and string
// keys kept apart, every key found again after the index has grown many times, unknown keys
// not found, values that never move, insertion order for ForEach, a value that keeps its
// identity in a member (the worker's WorkerKey and its KeyId), the count of each kind.
#include <cstdint>
#include <string>
#include <vector>

#include "ps/key_table.h"

extern "C" {
#include "../common/check.h"
}

using kvstore::dist::KeyTable;

namespace {

struct Val {
  bool is_str = false;
  int64_t int_key = 0;
  std::string name;
  int tag = 0;
};

void test_empty_table_finds_nothing() {
  KeyTable<Val> t;
  CHECK(t.size() == 0);
  CHECK(t.FindInt(0) == nullptr);
  CHECK(t.FindStr("") == nullptr);
  CHECK(t.FindStr("w") == nullptr);
}

// An int key and a string key are different keys whatever their bytes (key.h).
void test_int_and_string_keys_apart() {
  KeyTable<Val> t;
  Val* i3 = t.Insert(false, 3, "");
  CHECK(i3->int_key == 3 && !i3->is_str);
  CHECK(t.FindStr("3") == nullptr);
  Val* s3 = t.Insert(true, 0, "3");
  CHECK(s3 != i3 && s3->is_str && s3->name == "3");
  CHECK(t.FindInt(3) == i3);
  CHECK(t.FindStr("3") == s3);
  CHECK(t.FindInt(0) == nullptr);  // the string key's int_key is not an int key
  CHECK(t.Find(true, 3, "3") == s3);
  CHECK(t.Find(false, 3, "3") == i3);
  // Names that differ only in length or in one byte, and a name with a NUL byte.
  Val* a = t.Insert(true, 0, "a");
  Val* aa = t.Insert(true, 0, "aa");
  const std::string nul("a\0b", 3);
  Val* anb = t.Insert(true, 0, nul);
  CHECK(t.FindStr("a") == a && t.FindStr("aa") == aa && t.FindStr(nul) == anb);
  CHECK(t.FindStr("ab") == nullptr && t.FindStr(std::string("a\0c", 3)) == nullptr);
  CHECK(t.size() == 5);
}

// 100,000 int keys of several shapes (consecutive, negative, strides of 2^32 whose low bits
// are equal, the extremes) and 20,000 string keys: each found as itself after the index grew
// from 16 entries, none found before its insert, no value moved.
void test_many_keys_found_and_stable() {
  KeyTable<Val> t;
  std::vector<int64_t> ints;
  for (int64_t i = 0; i < 60000; ++i) ints.push_back(i);
  for (int64_t i = 1; i <= 20000; ++i) ints.push_back(-i);
  for (int64_t i = 1; i <= 19998; ++i) ints.push_back(i << 32);
  ints.push_back(INT64_MAX);
  ints.push_back(INT64_MIN);
  std::vector<Val*> iv, sv;
  int tag = 0;
  for (int64_t k : ints) {
    CHECK(t.FindInt(k) == nullptr);
    Val* v = t.Insert(false, k, "");
    v->tag = tag++;
    iv.push_back(v);
  }
  std::vector<std::string> names;
  for (int i = 0; i < 20000; ++i) names.push_back("layer" + std::to_string(i) + ".weight");
  for (const std::string& n : names) {
    CHECK(t.FindStr(n) == nullptr);
    Val* v = t.Insert(true, 0, n);
    v->tag = tag++;
    sv.push_back(v);
  }
  CHECK(t.size() == ints.size() + names.size());
  int wrong = 0;
  for (size_t i = 0; i < ints.size(); ++i) {
    Val* v = t.FindInt(ints[i]);
    if (v != iv[i] || v->int_key != ints[i] || v->tag != static_cast<int>(i)) ++wrong;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    Val* v = t.FindStr(names[i]);
    if (v != sv[i] || v->name != names[i] || v->tag != static_cast<int>(ints.size() + i)) ++wrong;
  }
  CHECK_MSG(wrong == 0, "%d keys not found as themselves", wrong);
  CHECK(t.FindInt(60000) == nullptr && t.FindInt(-20001) == nullptr && t.FindInt(int64_t{19999} << 32) == nullptr);
  CHECK(t.FindStr("layer20000.weight") == nullptr && t.FindStr("layer0.bias") == nullptr);
  // ForEach: every value once, in insertion order.
  int seen = 0;
  bool ordered = true;
  t.ForEach([&](Val& v) { ordered = ordered && v.tag == seen; ++seen; });
  CHECK(seen == tag && ordered);
}

// A value whose identity is a member, as WorkerKey's KeyId (worker_keys.h): Insert sets the
// member, string keys are compared on the member's name, the value's own fields are free.
struct Id {
  bool is_str = false;
  int64_t int_key = 0;
  std::string name;
};
struct Outer {
  std::string name = "not the key";  // a field of the value that is not its identity
  Id id;
  int tag = 0;
};
struct IdInMember {
  static Id& Of(Outer& v) { return v.id; }
};

void test_identity_in_a_member() {
  KeyTable<Outer, IdInMember> t;
  Outer* w = t.Insert(true, 0, "weight");
  Outer* i7 = t.Insert(false, 7, "");
  CHECK(w->id.is_str && w->id.name == "weight" && w->name == "not the key");
  CHECK(!i7->id.is_str && i7->id.int_key == 7);
  CHECK(t.FindStr("weight") == w && t.FindInt(7) == i7);
  CHECK(t.FindStr("not the key") == nullptr && t.FindStr("7") == nullptr);
  std::vector<Outer*> more;
  for (int i = 0; i < 1000; ++i) more.push_back(t.Insert(true, 0, "k" + std::to_string(i)));
  int wrong = 0;
  for (int i = 0; i < 1000; ++i) wrong += t.FindStr("k" + std::to_string(i)) != more[static_cast<size_t>(i)];
  CHECK_MSG(wrong == 0, "%d string keys not found through the member", wrong);
  CHECK(t.FindStr("weight") == w);
}

// CountOf: the keys of each kind (a worker's store holds one kind; dist_states.cc asks
// which).
void test_count_of_each_kind() {
  KeyTable<Val> t;
  CHECK(t.CountOf(false) == 0 && t.CountOf(true) == 0);
  t.Insert(false, 1, "");
  t.Insert(false, 2, "");
  t.Insert(true, 0, "a");
  CHECK(t.CountOf(false) == 2 && t.CountOf(true) == 1 && t.size() == 3);
}

}  // namespace

int main() {
  test_identity_in_a_member();
  test_count_of_each_kind();
  test_empty_table_finds_nothing();
  test_int_and_string_keys_apart();
  test_many_keys_found_and_stable();
  return check_summary();
}
