// test_worker_groups.cc - a data call's arrays grouped by key (src/ps/worker_groups.h), without
// sockets: one group per distinct key in first-appearance order, each key's arrays in call
// order, whatever the order of the keys (init order, its reverse, either turning back part
// way, repeats near and far), checked against a plain reference on random calls; `find` is
// asked once per key, in order, and its error ends the call; a group's ArrayList keeps its
// arrays in order.
#include <cstdint>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ps/worker_groups.h"

extern "C" {
#include "../common/check.h"
}

using kvstore::dist::GroupArrays;
using kvstore::dist::KeyGroups;
using kvstore::dist::WorkerKey;

namespace {

// Records with order ids 1..n (as AddKeys gives them, in init order).
std::vector<WorkerKey> Records(size_t n) {
  std::vector<WorkerKey> recs(n);
  for (size_t i = 0; i < n; ++i) recs[i].order_id = i + 1;
  return recs;
}

// Groups a call naming records by index `call` (array i is &slots[i]), with a reference
// grouping by ordered map; true when they agree.
bool GroupsLikeReference(std::vector<WorkerKey>& recs, const std::vector<size_t>& call,
                         KeyGroups<const int>* out = nullptr) {
  std::vector<int> slots(call.size());
  std::vector<const int*> arrays;
  for (size_t i = 0; i < call.size(); ++i) arrays.push_back(&slots[i]);
  size_t asked = 0;
  bool in_order = true;
  KeyGroups<const int> got = GroupArrays(call.size(), arrays.data(), [&](size_t i) {
    in_order &= i == asked++;
    return &recs[call[i]];
  });
  // Reference: first appearance, then each key's arrays in call order.
  std::map<const WorkerKey*, size_t> seen;
  KeyGroups<const int> want;
  for (size_t i = 0; i < call.size(); ++i) {
    WorkerKey* k = &recs[call[i]];
    auto it = seen.find(k);
    if (it == seen.end()) {
      seen[k] = want.size();
      want.emplace_back(k, kvstore::dist::ArrayList<const int>(arrays[i]));
    } else {
      want[it->second].second.push_back(arrays[i]);
    }
  }
  if (out != nullptr) *out = got;
  bool same = got.size() == want.size();
  for (size_t g = 0; same && g < got.size(); ++g) {
    same = got[g].first == want[g].first && got[g].second.ToVector() == want[g].second.ToVector();
  }
  return in_order && asked == call.size() && same;
}

void test_ordered_calls_group_one_key_each() {
  std::vector<WorkerKey> recs = Records(40);
  std::vector<size_t> up, down;
  for (size_t i = 0; i < 40; ++i) {
    up.push_back(i);
    down.push_back(39 - i);
  }
  KeyGroups<const int> g;
  CHECK(GroupsLikeReference(recs, up, &g));
  CHECK(g.size() == 40 && g.front().first == &recs[0] && g.back().first == &recs[39]);
  CHECK(GroupsLikeReference(recs, down, &g));
  CHECK(g.size() == 40 && g.front().first == &recs[39] && g.back().first == &recs[0]);
  std::vector<size_t> gaps = {2, 5, 6, 30, 31};  // ascending, not consecutive
  CHECK(GroupsLikeReference(recs, gaps, &g));
  CHECK(g.size() == 5);
  CHECK(GroupsLikeReference(recs, {}, &g));
  CHECK(g.empty());
  CHECK(GroupsLikeReference(recs, {7}, &g));
  CHECK(g.size() == 1 && g[0].second.size() == 1);
}

void test_repeats_and_turns_group_by_key() {
  std::vector<WorkerKey> recs = Records(10);
  KeyGroups<const int> g;
  // A repeat right after the first key: one group of two arrays.
  CHECK(GroupsLikeReference(recs, {3, 3}, &g));
  CHECK(g.size() == 1 && g[0].second.size() == 2);
  // An ascending run, then a repeat of its first key, then new keys on either side.
  CHECK(GroupsLikeReference(recs, {1, 2, 3, 1, 4, 0}, &g));
  CHECK(g.size() == 5 && g[0].first == &recs[1] && g[0].second.size() == 2 && g[4].first == &recs[0]);
  // Turns without repeats: each key its own group, in call order.
  CHECK(GroupsLikeReference(recs, {1, 3, 2}, &g));
  CHECK(g.size() == 3 && g[2].first == &recs[2]);
  CHECK(GroupsLikeReference(recs, {5, 4, 6}, &g));
  CHECK(g.size() == 3);
  // A descending run, then a repeat.
  CHECK(GroupsLikeReference(recs, {5, 4, 5, 4, 4}, &g));
  CHECK(g.size() == 2 && g[0].second.size() == 2 && g[1].second.size() == 3);
}

void test_random_calls_match_reference() {
  std::mt19937 rng(13);
  std::vector<WorkerKey> recs = Records(64);
  int bad = 0;
  for (int t = 0; t < 2000; ++t) {
    const size_t n = rng() % 80;
    const size_t range = 1 + rng() % 64;
    std::vector<size_t> call;
    const int shape = t % 3;  // 0: random, 1: ascending with one disturbance, 2: descending
    for (size_t i = 0; i < n; ++i) {
      if (shape == 0) call.push_back(rng() % range);
      else call.push_back(shape == 1 ? i % 64 : 63 - i % 64);
    }
    if (shape != 0 && n > 0) call[rng() % n] = rng() % 64;
    bad += !GroupsLikeReference(recs, call);
  }
  CHECK_MSG(bad == 0, "%d of 2000 random calls grouped unlike the reference", bad);
}

// ArrayList (array_list.h): one array inline, more in a vector, contiguous from begin() and
// intact through copies and moves.
void test_array_list_keeps_arrays_in_order() {
  int x[4] = {};
  kvstore::dist::ArrayList<int> l;
  CHECK(l.empty() && l.size() == 0 && l.begin() == l.end());
  for (int i = 0; i < 4; ++i) {
    l.push_back(&x[i]);
    const std::vector<int*> v = l.ToVector();
    bool in_order = v.size() == static_cast<size_t>(i + 1) && l.size() == v.size();
    for (int j = 0; in_order && j <= i; ++j) in_order = v[static_cast<size_t>(j)] == &x[j] && l[static_cast<size_t>(j)] == &x[j];
    CHECK_MSG(in_order, "after %d push_backs", i + 1);
    kvstore::dist::ArrayList<int> copy = l;
    kvstore::dist::ArrayList<int> moved = std::move(copy);
    CHECK(moved.ToVector() == v && l.ToVector() == v);
  }
  kvstore::dist::ArrayList<int> one(&x[2]);
  CHECK(one.size() == 1 && one[0] == &x[2] && one.end() - one.begin() == 1);
}

void test_find_error_ends_the_call() {
  std::vector<WorkerKey> recs = Records(8);
  std::vector<int> slots(8);
  std::vector<const int*> arrays;
  for (int& s : slots) arrays.push_back(&s);
  size_t asked = 0;
  bool threw = false;
  try {
    GroupArrays(arrays.size(), arrays.data(), [&](size_t i) -> WorkerKey* {
      ++asked;
      if (i == 5) throw std::runtime_error("key 5 is not initialised");
      return &recs[i % 3];
    });
  } catch (const std::runtime_error& e) {
    threw = std::string(e.what()) == "key 5 is not initialised";
  }
  CHECK(threw);
  CHECK(asked == 6);
}

}  // namespace

int main() {
  test_ordered_calls_group_one_key_each();
  test_repeats_and_turns_group_by_key();
  test_random_calls_match_reference();
  test_array_list_keeps_arrays_in_order();
  test_find_error_ends_the_call();
  return check_summary();
}
