// test_row_sparse_push.cc - the lazy path of a row_sparse push in the in-process stores,
// white-box: an updater that asks for kRows sees exactly the pushed rows (their summed
// gradient and the gathered rows of the stored value, nothing else), only those rows change
// on commit, and a failure anywhere in the call (UpdateRows itself, or a dense key's Update
// after it) leaves every stored value and every staged state as it was.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/array.h"
#include "core/row_sparse.h"
#include "store/store.h"

extern "C" {
#include "../common/check.h"
}

using namespace kvstore;

namespace {

constexpr int64_t kRows = 8, kCols = 3;

// weight <- 2 * weight + grad on the given rows (UpdateRows) or on everything (Update);
// throws on key `fail_key`. Stages a marker per key so the test sees commits and discards.
class RowsUpdater final : public Updater {
 public:
  struct Marker final : UpdateTxn::Staged {
    int* committed;
    int* discarded;
    void Commit() noexcept override { ++*committed; }
    void Discard() noexcept override { ++*discarded; }
  };

  void Update(int key, const char*, Array* recv, Array* stored, UpdateTxn* txn) override {
    ++dense_calls;
    recv_was_row_sparse = recv->is_row_sparse();
    Stage(txn);
    float* w = static_cast<float*>(stored->data());
    const float* g = static_cast<const float*>(recv->data());
    for (int64_t i = 0; i < stored->size(); ++i) w[i] = 2 * w[i] + g[i];
    KV_CHECK(key != fail_key, KV_ERR_CALLBACK, "test updater fails key %d", key);
  }

  RowSparseRecv row_sparse_recv() const override { return RowSparseRecv::kRows; }

  void UpdateRows(int key, const char*, const Shape& shape, const int64_t* row_ids, int64_t n,
                  const Array& grad, Array* weight, UpdateTxn* txn) override {
    ++rows_calls;
    seen_shape = shape;
    seen_rows.assign(row_ids, row_ids + n);
    seen_grad_shape = grad.shape();
    seen_weight_shape = weight->shape();
    seen_weight.assign(static_cast<const float*>(weight->data()),
                       static_cast<const float*>(weight->data()) + weight->size());
    Stage(txn);
    float* w = static_cast<float*>(weight->data());
    const float* g = static_cast<const float*>(grad.data());
    for (int64_t i = 0; i < weight->size(); ++i) w[i] = 2 * w[i] + g[i];
    KV_CHECK(key != fail_key, KV_ERR_CALLBACK, "test updater fails key %d", key);
  }

  int fail_key = -1;
  int dense_calls = 0, rows_calls = 0, committed = 0, discarded = 0;
  bool recv_was_row_sparse = false;
  Shape seen_shape, seen_grad_shape, seen_weight_shape;
  std::vector<int64_t> seen_rows;
  std::vector<float> seen_weight;

 private:
  void Stage(UpdateTxn* txn) {
    markers_.push_back(std::make_unique<Marker>());
    markers_.back()->committed = &committed;
    markers_.back()->discarded = &discarded;
    txn->Add(markers_.back().get());
  }
  std::vector<std::unique_ptr<Marker>> markers_;
};

// A dense (kRows, kCols) float32 array whose element (r, c) is 10 r + c.
std::unique_ptr<Array> Table() {
  std::unique_ptr<Array> a = Array::Create({kRows, kCols}, KV_FLOAT32, Context{});
  float* p = static_cast<float*>(a->data());
  for (int64_t i = 0; i < a->size(); ++i) p[i] = static_cast<float>(10 * (i / kCols) + i % kCols);
  return a;
}

// A row_sparse (kRows, kCols) float32 array of rows `ids`, every element `value`.
std::unique_ptr<Array> Grad(std::vector<int64_t> ids, float value) {
  std::unique_ptr<Array> a = Array::CreateRowSparse({kRows, kCols}, KV_FLOAT32, Context{}, std::move(ids));
  float* p = static_cast<float*>(a->data());
  for (int64_t i = 0; i < a->size(); ++i) p[i] = value;
  return a;
}

std::vector<float> Pull(Store& store, int key) {
  std::unique_ptr<Array> out = Array::Create({kRows, kCols}, KV_FLOAT32, Context{});
  Array* outs[1] = {out.get()};
  store.Pull(KeyList::Ints(1, &key), outs, 0);
  const float* p = static_cast<const float*>(out->data());
  return std::vector<float>(p, p + out->size());
}

std::vector<float> Values(const Array& a) {
  const float* p = static_cast<const float*>(a.data());
  return std::vector<float>(p, p + a.size());
}

void TestLazyRowsOnly() {
  for (const char* type : {"local", "device"}) {
    std::unique_ptr<Store> store = CreateStore(type);
    std::unique_ptr<Array> table = Table();
    int key = 5;
    const Array* init[1] = {table.get()};
    store->Init(KeyList::Ints(1, &key), init);
    auto updater = std::make_shared<RowsUpdater>();
    store->SetUpdater(updater);
    // two values of one key: rows {1, 6} and {6, 2}; the sum has rows {1, 2, 6}
    std::unique_ptr<Array> a = Grad({1, 6}, 1), b = Grad({2, 6}, 0.5f);
    const Array* vals[2] = {a.get(), b.get()};
    int keys[2] = {key, key};
    store->Push(KeyList::Ints(2, keys), vals, 0);
    CHECK(updater->rows_calls == 1 && updater->dense_calls == 0);
    CHECK(updater->seen_shape == Shape({kRows, kCols}));
    CHECK(updater->seen_rows == std::vector<int64_t>({1, 2, 6}));
    CHECK(updater->seen_grad_shape == Shape({3, kCols}) && updater->seen_weight_shape == Shape({3, kCols}));
    CHECK(updater->seen_weight == std::vector<float>({10, 11, 12, 20, 21, 22, 60, 61, 62}));  // gathered rows
    CHECK(updater->committed == 1 && updater->discarded == 0);
    std::vector<float> want = Values(*table);
    const float grad_of_row[kRows] = {0, 1, 0.5f, 0, 0, 0, 1.5f, 0};
    for (int64_t r : {1, 2, 6}) {
      for (int64_t c = 0; c < kCols; ++c) want[r * kCols + c] = 2 * want[r * kCols + c] + grad_of_row[r];
    }
    CHECK_MSG(Pull(*store, key) == want, "%s: only the pushed rows change", type);
    // later pushes reuse the key's scratch memory, growing it and then using part of it
    for (const std::vector<int64_t>& ids : {std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, std::vector<int64_t>{3}}) {
      std::unique_ptr<Array> g = Grad(ids, 0.25f);
      const Array* one[1] = {g.get()};
      store->Push(KeyList::Ints(1, &key), one, 0);
      for (int64_t r : ids) {
        for (int64_t c = 0; c < kCols; ++c) want[r * kCols + c] = 2 * want[r * kCols + c] + 0.25f;
      }
      CHECK_MSG(updater->seen_rows == ids, "%s: %zu rows seen", type, updater->seen_rows.size());
      CHECK_MSG(Pull(*store, key) == want, "%s: push of %zu rows", type, ids.size());
    }
  }
}

// A failure in UpdateRows, or in a dense key's Update after the row_sparse key was
// prepared, changes nothing and discards what was staged.
void TestFailureChangesNothing() {
  std::unique_ptr<Store> store = CreateStore("local");
  std::unique_ptr<Array> table = Table();
  int keys[2] = {1, 2};
  const Array* init[2] = {table.get(), table.get()};
  store->Init(KeyList::Ints(2, keys), init);
  auto updater = std::make_shared<RowsUpdater>();
  store->SetUpdater(updater);
  std::unique_ptr<Array> grad = Grad({3}, 1);
  std::unique_ptr<Array> dense = Table();
  const Array* vals[2] = {grad.get(), dense.get()};
  for (int fail : {1, 2}) {
    updater->fail_key = fail;
    updater->committed = updater->discarded = 0;
    bool threw = false;
    try {
      store->Push(KeyList::Ints(2, keys), vals, 0);
    } catch (const Error& e) {
      threw = e.code() == KV_ERR_CALLBACK;
    }
    CHECK_MSG(threw, "failing key %d: the push fails with CALLBACK", fail);
    CHECK_MSG(updater->committed == 0 && updater->discarded >= 1, "failing key %d: staged state discarded", fail);
    CHECK_MSG(Pull(*store, 1) == Values(*table) && Pull(*store, 2) == Values(*table),
              "failing key %d: no stored value changed", fail);
  }
}

// An updater that leaves row_sparse_recv() at kAsIs but is not a callback gets a dense sum.
void TestBuiltinAsIsIsDense() {
  class Plain final : public Updater {
   public:
    void Update(int, const char*, Array* recv, Array* stored, UpdateTxn*) override {
      dense_recv = !recv->is_row_sparse() && recv->shape() == stored->shape();
    }
    bool dense_recv = false;
  };
  std::unique_ptr<Store> store = CreateStore("local");
  std::unique_ptr<Array> table = Table();
  int key = 0;
  const Array* init[1] = {table.get()};
  store->Init(KeyList::Ints(1, &key), init);
  auto updater = std::make_shared<Plain>();
  store->SetUpdater(updater);
  std::unique_ptr<Array> grad = Grad({0}, 1);
  const Array* vals[1] = {grad.get()};
  store->Push(KeyList::Ints(1, &key), vals, 0);
  CHECK(updater->dense_recv);
}

}  // namespace

int main() {
  TestLazyRowsOnly();
  TestFailureChangesNothing();
  TestBuiltinAsIsIsDense();
  return check_summary();
}
