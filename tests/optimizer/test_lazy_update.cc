// test_lazy_update.cc - the lazy (row-wise) updates of the built-in optimizers:
// Updater::row_sparse_recv and Updater::UpdateRows (optimizer/updater.h), white-box, on the
// updater itself (the stores that call it are tested with them).
//
// The lazy rule: a sum of row_sparse pushes updates only its rows and their state, as the
// reference's sgd and adam do for a row_sparse gradient with lazy_update=True. So
// UpdateRows on rows R equals a dense Update with a gradient that is zero outside R on the
// rows of R, and every other row keeps its weight and its state (a dense update would decay
// them and move their momentum). Cases:
//   - matches_reference: the weights and states after several lazy steps (and lazy steps
//     interleaved with dense ones) are the reference's bits, float32, float64 and float16
//     with multi_precision; local_store_*: the weights are the same through a `local`
//     store's row_sparse pushes, also when the job saves its optimizer states midway and a
//     fresh store loads them; the expected values are MXNet 1.9.1's, printed by
//       /tmp/mxvenv/bin/python tests/optimizer/lazy_update_reference.py
//     (the script beside this file; it runs mx.optimizer.SGD/Adam(lazy_update=True) on a
//     dense weight with mx.nd.sparse.row_sparse_array gradients);
//   - hand_computed: a few steps worked out by hand in exact binary fractions;
//   - rows_equal_dense_on_pushed_rows: the comparison with the dense Update above;
//   - discard / commit_after_discard / one_entry_per_txn: the transaction rules;
//   - multi_precision_*: the master copy of float16 keys, first taken from rows;
//   - save_load_*: optimizer states saved after lazy updates round-trip bit-identically;
//   - errors and large arrays (the parallel path).
//
// Usage: test_lazy_update [case]   (no argument runs every case; links kvstore_internal)
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../common/cases.h"
#include "../common/check.h"
#include "core/array.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kvstore/kvstore.h"
#include "optimizer/optimizer.h"
#include "optimizer/state_file.h"
#include "optimizer/states.h"

namespace {

using kvstore::Array;
using kvstore::RowSparseRecv;
using kvstore::Shape;
using kvstore::Updater;
using kvstore::UpdateTxn;
namespace opt = kvstore::optimizer;

constexpr int64_t kRows = 6, kCols = 4;  // lazy_update_reference.py's ROWS, COLS
constexpr int kKey = 7;

size_t ElemSize(int dtype) { return kvstore::DTypeSize(dtype); }

double GetElem(const void* p, int dtype, int64_t i) {
  switch (dtype) {
    case KV_FLOAT64: return static_cast<const double*>(p)[i];
    case KV_FLOAT16: return kvstore::HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case KV_UINT8: return static_cast<const uint8_t*>(p)[i];  // a master copy's mask
    default: return static_cast<const float*>(p)[i];
  }
}

void PutElem(void* p, int dtype, int64_t i, double v) {
  switch (dtype) {
    case KV_FLOAT64: static_cast<double*>(p)[i] = v; break;
    case KV_FLOAT16:
      static_cast<uint16_t*>(p)[i] = kvstore::FloatToHalf(static_cast<float>(v));
      break;
    default: static_cast<float*>(p)[i] = static_cast<float>(v); break;
  }
}

// The reference script's gradient of row r, column c at `step` (exact in float16).
double GradValue(int step, int64_t r, int64_t c) {
  return static_cast<double>((step * 7 + r * 5 + c * 3) % 11 - 5) * 0.25;
}

// The reference script's first weight: float32(i*0.37 - 4.1), then the key's dtype.
double Weight0(int64_t i) { return static_cast<float>(static_cast<double>(i) * 0.37 - 4.1); }

// One key of an optimizer: the whole stored value in host memory (what a store keeps) and
// the optimizer. Steps run as a store runs them: a lazy step gathers the pushed rows into
// a scratch block, calls UpdateRows, and on commit scatters the block back.
struct Key {
  std::shared_ptr<Updater> updater;
  int dtype;
  Shape shape;
  std::vector<uint8_t> stored;

  Key(const std::string& spec, int dtype_, Shape shape_ = {kRows, kCols})
      : updater(kvstore::CreateOptimizer(spec)), dtype(dtype_), shape(std::move(shape_)) {
    stored.resize(static_cast<size_t>(Size()) * ElemSize(dtype));
    for (int64_t i = 0; i < Size(); ++i) PutElem(stored.data(), dtype, i, Weight0(i));
  }
  int64_t Size() const { return kvstore::ShapeSize(shape); }
  int64_t RowLen() const { return Size() / shape[0]; }
  double At(int64_t i) const { return GetElem(stored.data(), dtype, i); }
  opt::StateHolder* Holder() const { return dynamic_cast<opt::StateHolder*>(updater.get()); }

  // A lazy step on `rows` with the gradient of `step`, staged in `txn`; the scratch block
  // comes back through `block` for the caller to scatter on commit.
  void StageRows(int step, const std::vector<int64_t>& rows, UpdateTxn* txn,
                 std::unique_ptr<Array>* block) {
    const int64_t n = static_cast<int64_t>(rows.size()), len = RowLen();
    Shape bshape = shape;
    bshape[0] = n;
    const int gdtype = updater->RecvDType(dtype);
    *block = Array::Create(bshape, dtype, kvstore::Context());
    std::unique_ptr<Array> grad = Array::Create(bshape, gdtype, kvstore::Context());
    const size_t row_bytes = static_cast<size_t>(len) * ElemSize(dtype);
    for (int64_t j = 0; j < n; ++j) {
      if (rows[j] >= 0 && rows[j] < shape[0]) {  // the errors case passes bad row ids
        std::memcpy(static_cast<uint8_t*>((*block)->data()) + j * row_bytes,
                    stored.data() + rows[j] * row_bytes, row_bytes);
      }
      for (int64_t c = 0; c < len; ++c) {
        PutElem(grad->data(), gdtype, j * len + c, GradValue(step, rows[j], c));
      }
    }
    updater->UpdateRows(kKey, nullptr, shape, rows.data(), n, *grad, block->get(), txn);
  }
  void Scatter(const std::vector<int64_t>& rows, const Array& block) {
    const size_t row_bytes = static_cast<size_t>(RowLen()) * ElemSize(dtype);
    for (size_t j = 0; j < rows.size(); ++j) {
      std::memcpy(stored.data() + rows[j] * row_bytes,
                  static_cast<const uint8_t*>(block.data()) + j * row_bytes, row_bytes);
    }
  }
  void Rows(int step, const std::vector<int64_t>& rows) {
    UpdateTxn txn;
    std::unique_ptr<Array> block;
    StageRows(step, rows, &txn, &block);
    txn.Commit();
    Scatter(rows, *block);
  }
  // A dense step: the gradient of `step` on every row (or only on `only`, zero elsewhere).
  void Dense(int step, const std::vector<int64_t>* only = nullptr) {
    const int gdtype = updater->RecvDType(dtype);
    std::unique_ptr<Array> value = Array::Create(shape, dtype, kvstore::Context());
    std::unique_ptr<Array> grad = Array::Create(shape, gdtype, kvstore::Context());
    std::memcpy(value->data(), stored.data(), stored.size());
    const int64_t len = RowLen();
    std::vector<bool> pushed(static_cast<size_t>(shape[0]), only == nullptr);
    for (size_t j = 0; only != nullptr && j < only->size(); ++j) pushed[(*only)[j]] = true;
    for (int64_t r = 0; r < shape[0]; ++r) {
      for (int64_t c = 0; c < len; ++c) {
        PutElem(grad->data(), gdtype, r * len + c, pushed[r] ? GradValue(step, r, c) : 0.0);
      }
    }
    UpdateTxn txn;
    updater->Update(kKey, nullptr, grad.get(), value.get(), &txn);
    txn.Commit();
    std::memcpy(stored.data(), value->data(), stored.size());
  }
  // The committed state (one record; none before the first update).
  std::vector<opt::KeyRecord> State() const { return Holder()->SaveStates(); }
};

// State array `i` of `record` as doubles.
std::vector<double> StateValues(const opt::KeyRecord& record, size_t i) {
  const opt::StateArray& a = record.arrays.at(i);
  const int64_t n = kvstore::ShapeSize(a.shape);
  std::vector<double> out;
  for (int64_t e = 0; e < n; ++e) out.push_back(GetElem(a.bytes.data(), a.dtype, e));
  return out;
}

// Bit-equality of `got` (elements of `dtype`) with `want` converted to `dtype`.
void CheckBits(const char* what, const std::vector<double>& got, const std::vector<double>& want,
               int dtype) {
  CHECK_MSG(got.size() == want.size(), "%s: %zu values, want %zu", what, got.size(), want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const bool same = dtype == KV_FLOAT64
                          ? got[i] == want[i]
                          : static_cast<float>(got[i]) == static_cast<float>(want[i]);
    CHECK_MSG(same, "%s[%zu] = %.17g, want %.17g", what, i, got[i], want[i]);
  }
}

std::vector<double> Stored(const Key& k) {
  std::vector<double> out;
  for (int64_t i = 0; i < k.Size(); ++i) out.push_back(k.At(i));
  return out;
}

bool SameRecords(const std::vector<opt::KeyRecord>& a, const std::vector<opt::KeyRecord>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].steps != b[i].steps || a[i].arrays.size() != b[i].arrays.size()) return false;
    for (size_t j = 0; j < a[i].arrays.size(); ++j) {
      if (a[i].arrays[j].bytes != b[i].arrays[j].bytes) return false;
    }
  }
  return true;
}

// The code of the kvstore::Error that fn throws (0: none).
template <typename Fn>
int ErrorOf(Fn fn, std::string* message = nullptr) {
  try {
    fn();
  } catch (const kvstore::Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// The reference's numbers.

// One scenario of lazy_update_reference.py: the optimizer, the weight dtype (float16 means
// multi_precision), whether dense steps are interleaved, and the values after the last step.
struct Reference {
  const char* label;
  const char* spec;
  int dtype;
  bool interleaved;
  std::vector<double> weight;     // float32 / float64 keys
  std::vector<uint16_t> weight16;  // float16 keys: the bits
  std::vector<double> master;     // float16 keys: the float32 master copy
  std::vector<double> state0, state1;
};

// Printed by: /tmp/mxvenv/bin/python tests/optimizer/lazy_update_reference.py
// (MXNet 1.9.1; the lines below are its output, reformatted).
const std::vector<Reference>& References() {
  static const std::vector<Reference> refs = {
    {"sgd", "sgd(learning_rate=0.1,wd=0.01,rescale_grad=0.5)",
     KV_FLOAT32, false,
     // weight
     {-4.12090015, -3.78876996, -3.31913996, -2.98701, -2.56476259, -2.27046466, -1.83880448,
     -1.54450655, -1.13999999, -0.769999981, -0.400000006, -0.0299999993, 0.340000004,
     0.709999979, 1.08000004, 1.45000005, 1.728912, 2.29807234, 2.59237027, 2.88666797,
     3.26846576, 3.70012617, 3.99442434, 4.42622232},
     {}, {},  // weight16, master
     {},  // state0
     {}},  // state1
    {"sgd_clip", "sgd(learning_rate=0.1,wd=0.01,clip_gradient=0.3)",
     KV_FLOAT32, false,
     // weight
     {-4.12590027, -3.75626993, -3.32663989, -2.98701, -2.58476257, -2.25047231, -1.87627196,
     -1.50701153, -1.13999999, -0.769999981, -0.400000006, -0.0299999993, 0.340000004,
     0.709999979, 1.08000004, 1.45000005, 1.756392, 2.24559236, 2.6098578, 2.86917305, 3.29343343,
     3.69263387, 4.00192404, 4.4012146},
     {}, {},  // weight16, master
     {},  // state0
     {}},  // state1
    {"sgd_momentum", "sgd(learning_rate=0.1,momentum=0.9,wd=0.01,rescale_grad=0.5)",
     KV_FLOAT32, false,
     // weight
     {-4.12089968, -3.78876996, -3.31913996, -2.98701, -2.56240463, -2.30218959, -1.78086233,
     -1.52064753, -1.13999999, -0.769999981, -0.400000006, -0.0299999993, 0.340000004,
     0.709999979, 1.08000004, 1.45000005, 1.68227386, 2.34110141, 2.60131598, 2.86153102,
     3.20924568, 3.73057318, 3.99078822, 4.3885026},
     {}, {},  // weight16, master
     // state0
     {-0.0208999999, -0.0587700009, 0.040860001, 0.00299000018, 0.0549753793, -0.0169397518,
     0.0347576141, -0.0371575095, 0, 0, 0, 0, 0, 0, 0, 0, -0.0859061778, 0.103291184,
     0.0313760601, -0.040539071, -0.0249541998, 0.0267431699, -0.0451719612, 0.0204129107},
     {}},  // state1
    {"sgd_momentum_clip", "sgd(learning_rate=0.1,momentum=0.9,wd=0.01,rescale_grad=0.5,clip_gradient=0.3)",
     KV_FLOAT32, false,
     // weight
     {-4.12089968, -3.75626993, -3.32663989, -2.98701, -2.58240461, -2.28794718, -1.84257984,
     -1.4881475, -1.13999999, -0.769999981, -0.400000006, -0.0299999993, 0.340000004, 0.709999979,
     1.08000004, 1.45000005, 1.72775376, 2.2706213, 2.60131598, 2.86153102, 3.26346326,
     3.71633077, 3.99828815, 4.37024546},
     {}, {},  // weight16, master
     // state0
     {-0.0208999999, -0.0262700003, 0.0333600007, 0.00299000018, 0.0349753797, -0.0101972492,
     0.00554012135, -0.00465751067, 0, 0, 0, 0, 0, 0, 0, 0, -0.060426183, 0.0528111905,
     0.0313760601, -0.040539071, -0.00323669985, 0.0200006701, -0.0376719609, -0.00534458831},
     {}},  // state1
    {"adam", "adam(learning_rate=0.01,wd=0.01,rescale_grad=0.5)",
     KV_FLOAT32, false,
     // weight
     {-4.10744143, -3.73744154, -3.35255837, -2.98255873, -2.6022346, -2.26330495, -1.86621141,
     -1.50415564, -1.13999999, -0.769999981, -0.400000006, -0.0299999993, 0.340000004,
     0.709999979, 1.08000004, 1.45000005, 1.80231845, 2.20780468, 2.57743263, 2.91260982,
     3.29059768, 3.68201542, 4.02626801, 4.404212},
     {}, {},  // weight16, master
     // state0
     {0.0209000055, 0.0587700158, -0.0408600084, -0.00299000065, -0.0549680106, 0.0169650055,
     -0.0348120108, 0.0371410102, 0, 0, 0, 0, 0, 0, 0, 0, 0.0859480202, -0.103329018,
     -0.0313760042, 0.0405570082, 0.0250125639, -0.0267695617, 0.0451685712, -0.0203784481},
     // state1
     {4.36804403e-05, 0.000345386856, 0.00016695181, 8.93998447e-07, 0.000277463347,
     0.000145915867, 0.000467557693, 0.000442302058, 0, 0, 0, 0, 0, 0, 0, 0, 0.000422784826,
     0.000591952354, 6.01801949e-05, 0.000101706821, 0.000549538876, 0.000115683302,
     0.000174123634, 0.000512993836}},
    {"adam_clip", "adam(learning_rate=0.01,wd=0.01,rescale_grad=0.5,clip_gradient=0.2)",
     KV_FLOAT32, false,
     // weight
     {-4.10744143, -3.73744154, -3.35255837, -2.98255873, -2.60175157, -2.26097035, -1.87052619,
     -1.50052619, -1.13999999, -0.769999981, -0.400000006, -0.0299999993, 0.340000004,
     0.709999979, 1.08000004, 1.45000005, 1.80219042, 2.20780945, 2.57753253, 2.91230726,
     3.29296947, 3.68153667, 4.02582645, 4.40296936},
     {}, {},  // weight16, master
     // state0
     {0.0200000051, 0.0200000051, -0.0200000051, -0.00299000065, -0.0223580059, 0.00324000139,
     0.00200000033, 0.00200000033, 0, 0, 0, 0, 0, 0, 0, 0, 0.03800001, -0.03800001, -0.0289460067,
     0.0334200077, -0.00200000033, -0.0143225621, 0.0236360058, -0.00200000033},
     // state1
     {3.9999486e-05, 3.9999486e-05, 3.9999486e-05, 8.93998447e-07, 4.06852305e-05, 6.17449623e-05,
     7.99589761e-05, 7.99589761e-05, 0, 0, 0, 0, 0, 0, 0, 0, 7.99589761e-05, 7.99589761e-05,
     4.98698391e-05, 6.37368212e-05, 7.99589761e-05, 4.1311825e-05, 4.16299918e-05,
     7.99589761e-05}},
    {"sgd_momentum_f64", "sgd(learning_rate=0.1,momentum=0.9,wd=0.01,clip_gradient=0.3)",
     KV_FLOAT64, false,
     // weight
     {-4.1258999063976107, -3.7562700207213311, -3.3266398935866355, -2.9870100095494836,
     -2.5824045043707544, -2.2754472521273681, -1.8475798745723238, -1.4786524998009649,
     -1.1399999856948853, -0.76999998092651367, -0.40000000596046448, -0.029999999329447746,
     0.34000000357627869, 0.70999997854232788, 1.0800000429153442, 1.4500000476837158,
     1.727753868345919, 2.2706212511908754, 2.6300535048124334, 2.8395359939265932,
     3.263463251845907, 3.7163307486371822, 3.998288000508039, 4.3702452572962809},
     {}, {},  // weight16, master
     // state0
     {-0.025900001765042563, -0.026270001647844932, 0.033360001509189621, 0.002989999987259506,
     0.034975381322288834, 0.002302749528523558, 0.00054011903895255162, -0.00016251095604885579,
     0, 0, 0, 0, 0, 0, 0, 0, -0.060426182428148678, 0.052811192372192589, 0.047613561584069437,
     -0.057534071146554178, -0.0032366989035203658, 0.020000670753059221, -0.037671961413235089,
     -0.0053445886621461408},
     {}},  // state1
    {"adam_f64", "adam(learning_rate=0.01,wd=0.01,clip_gradient=0.2)",
     KV_FLOAT64, false,
     // weight
     {-4.1074413104885261, -3.7374414249294441, -3.3525584892398674, -2.9825586706162577,
     -2.6017515956371842, -2.2594737320319203, -1.8705262631997082, -1.5005262584313366,
     -1.1399999856948853, -0.76999998092651367, -0.40000000596046448, -0.029999999329447746,
     0.34000000357627869, 0.70999997854232788, 1.0800000429153442, 1.4500000476837158,
     1.8021905295896752, 2.2078095800828712, 2.5778094656419532, 2.9121905438947899,
     3.2929695714062599, 3.6815364914157422, 4.0258266303880719, 4.4029694665020847},
     {}, {},  // weight16, master
     // state0
     {0.020000005066394877, 0.020000005066394877, -0.020000005066394877, -0.0029900006555765727,
     -0.022358005410417939, -0.0020000009834767671, 0.0020000009834767671, 0.0020000009834767671,
     0, 0, 0, 0, 0, 0, 0, 0, 0.038000009149312987, -0.038000009149312987, -0.038000009149312987,
     0.038000009149312987, -0.0020000009834767671, -0.014322561806195075, 0.023636005721360469,
     -0.0020000009834767671},
     // state1
     {3.9999486207946694e-05, 3.9999486207946694e-05, 3.9999486207946694e-05,
     8.9399845571398169e-07, 4.0685230857417717e-05, 7.9958973444662967e-05,
     7.9958973444662967e-05, 7.9958973444662967e-05, 0, 0, 0, 0, 0, 0, 0, 0,
     7.9958973444662967e-05, 7.9958973444662967e-05, 7.9958973444662967e-05,
     7.9958973444662967e-05, 7.9958973444662967e-05, 4.1311827350658244e-05,
     4.1629992972879903e-05, 7.9958973444662967e-05}},
    {"adam_mp", "adam(learning_rate=0.01,wd=0.01,clip_gradient=0.2,multi_precision=1)",
     KV_FLOAT16, false,
     {},  // weight
     // weight16
     {0xc41c, 0xc37a, 0xc2b4, 0xc1f7, 0xc134, 0xc085, 0xbf7b, 0xbe00, 0xbc8f, 0xba29, 0xb666,
     0xa7ae, 0x3571, 0x39ae, 0x3c52, 0x3dcd, 0x3f36, 0x406a, 0x4128, 0x41d3, 0x4296, 0x435d,
     0x4406, 0x4467},
     // master
     {-4.10900402, -3.73791027, -3.35193348, -2.98279309, -2.60089254, -2.25947356, -1.87040901,
     -1.50029182, -1.13964844, -0.770019531, -0.399902344, -0.0299987793, 0.340087891,
     0.709960938, 1.08007812, 1.45019531, 1.80250287, 2.20726252, 2.57835627, 2.91187811,
     3.29375076, 3.68145847, 4.02488899, 4.40312576},
     // state0
     {0.0200000051, 0.0200000051, -0.0200000051, -0.00299023488, -0.0223572329, -0.00200000033,
     0.00200000033, 0.00200000033, 0, 0, 0, 0, 0, 0, 0, 0, 0.03800001, -0.03800001, -0.03800001,
     0.03800001, -0.00200000033, -0.0143226404, 0.023635162, -0.00200000033},
     // state1
     {3.9999486e-05, 3.9999486e-05, 3.9999486e-05, 8.94138623e-07, 4.06847794e-05, 7.99589761e-05,
     7.99589761e-05, 7.99589761e-05, 0, 0, 0, 0, 0, 0, 0, 0, 7.99589761e-05, 7.99589761e-05,
     7.99589761e-05, 7.99589761e-05, 7.99589761e-05, 4.13117705e-05, 4.16292351e-05,
     7.99589761e-05}},
    {"sgd_momentum_clip_interleaved", "sgd(learning_rate=0.1,momentum=0.9,wd=0.01,rescale_grad=0.5,clip_gradient=0.3)",
     KV_FLOAT32, true,
     // weight
     {-4.12719822, -3.78401613, -3.31695032, -2.94627047, -2.53584433, -2.31983685, -1.86575115,
     -1.46085107, -1.19043267, -0.794737756, -0.329370409, -0.0311755296, 0.420984358,
     0.742916703, 1.02313161, 1.41882646, 1.72762668, 2.24566388, 2.63845563, 2.81596255,
     3.26346326, 3.71633077, 3.99828815, 4.37024546},
     {}, {},  // weight16, master
     // state0
     {-0.0166096035, 0.00464060158, 0.00633886363, 0.00506153703, 0.0465602465, -0.0318895765,
     -0.0231713131, 0.0272963885, -0.0390726402, 0.00449223071, 0.0402295999, -0.0137055311,
     0.0513243377, 0.00862670969, -0.0432884209, 0.00027645193, -0.0309857968, 0.0312230643,
     0.0270074736, -0.0474341698, -0.00323669985, 0.0200006701, -0.0376719609, -0.00534458831},
     {}},  // state1
    {"adam_clip_interleaved", "adam(learning_rate=0.01,wd=0.01,rescale_grad=0.5,clip_gradient=0.2)",
     KV_FLOAT32, true,
     // weight
     {-4.110044, -3.74607682, -3.35269308, -2.97530437, -2.59362531, -2.26514649, -1.8741852,
     -1.49747145, -1.15507853, -0.777030349, -0.385011345, -0.0247067939, 0.355250865,
     0.718601108, 1.06481159, 1.44296968, 1.80011988, 2.20572853, 2.58504081, 2.91229105,
     3.29296947, 3.68153667, 4.02582645, 4.40296936},
     {}, {},  // weight16, master
     // state0
     {0.0182000045, 0.00408630259, -0.00155301066, -0.000421900302, -0.0352239609, 0.0229160059,
     0.0218000058, -0.0182000045, 0.0302240066, -0.00200000033, -0.0308925658, 0.00872300193,
     -0.03800001, -0.00478256028, 0.0322220102, -0.00200000033, 0.0180461053, -0.0276504792,
     -0.0254462659, 0.0317971744, -0.00200000033, -0.0143225621, 0.0236360058, -0.00200000033},
     // state1
     {0.000119878503, 8.75894766e-05, 8.10032725e-05, 8.08511832e-05, 6.34505413e-05,
     0.000101682701, 0.000119878503, 0.000119878503, 5.28913733e-05, 7.99589761e-05,
     5.65810806e-05, 5.56836749e-05, 7.99589761e-05, 5.74293372e-05, 5.84224472e-05,
     7.99589761e-05, 0.000120165525, 0.000130397966, 0.000129729116, 0.000143527228,
     7.99589761e-05, 4.1311825e-05, 4.16299918e-05, 7.99589761e-05}},
    {"adam_mp_interleaved", "adam(learning_rate=0.01,wd=0.01,clip_gradient=0.2,multi_precision=1)",
     KV_FLOAT16, true,
     {},  // weight
     // weight16
     {0xc41d, 0xc37f, 0xc2b4, 0xc1f3, 0xc12f, 0xc086, 0xbf7f, 0xbdfd, 0xbc9f, 0xba37, 0xb628,
     0xa5e1, 0x35af, 0x39bc, 0x3c42, 0x3dc6, 0x3f34, 0x406a, 0x412d, 0x41d3, 0x4296, 0x435d,
     0x4406, 0x4467},
     // master
     {-4.1116066, -3.74887848, -3.35206842, -2.97553873, -2.59268212, -2.26252818, -1.87406802,
     -1.49723709, -1.15489936, -0.777049899, -0.384651482, -0.0229683984, 0.355338752,
     0.716991305, 1.0648272, 1.44316494, 1.80043209, 2.20757389, 2.58793283, 2.91156673,
     3.29375076, 3.68145847, 4.02488899, 4.40312576},
     // state0
     {0.0182000045, 0.0142000038, -0.00155238598, -0.000422088429, -0.0401215144, 0.0182000045,
     0.0218000058, -0.0182000045, 0.03800001, -0.00200000033, -0.03800001, 0.00200000033,
     -0.03800001, 0.00200000033, 0.03800001, -0.00200000033, 0.0180463567, -0.0363800079,
     -0.0327800065, 0.0363800079, -0.00200000033, -0.0143226404, 0.023635162, -0.00200000033},
     // state1
     {0.000119878503, 0.000119878503, 8.10028578e-05, 8.08513287e-05, 8.06435855e-05,
     0.000119878503, 0.000119878503, 0.000119878503, 7.99589761e-05, 7.99589761e-05,
     7.99589761e-05, 7.99589761e-05, 7.99589761e-05, 7.99589761e-05, 7.99589761e-05,
     7.99589761e-05, 0.000120165641, 0.000159758114, 0.000159758114, 0.000159758114,
     7.99589761e-05, 4.13117705e-05, 4.16292351e-05, 7.99589761e-05}},
  };
  return refs;
}

// The steps of lazy_update_reference.py: STEPS, or INTERLEAVED (-1 marks a dense step).
void RunSteps(Key* k, bool interleaved) {
  const std::vector<std::vector<int64_t>> steps =
      interleaved ? std::vector<std::vector<int64_t>>{{1, 4}, {-1}, {0, 4}, {-1}}
                  : std::vector<std::vector<int64_t>>{{1, 4}, {0, 1, 5}, {}, {4, 5}};
  for (size_t s = 0; s < steps.size(); ++s) {
    if (!steps[s].empty() && steps[s][0] == -1) {
      k->Dense(static_cast<int>(s));
    } else {
      k->Rows(static_cast<int>(s), steps[s]);
    }
  }
}

void matches_reference() {
  for (const Reference& r : References()) {
    check_set_context("%s", r.label);
    Key k(r.spec, r.dtype);
    RunSteps(&k, r.interleaved);
    const std::vector<opt::KeyRecord> state = k.State();
    CHECK(state.size() == 1 && state[0].steps == 4);
    if (state.size() != 1) continue;
    const size_t slots = (r.state0.empty() ? 0 : 1) + (r.state1.empty() ? 0 : 1);
    if (!r.state0.empty()) CheckBits("state0", StateValues(state[0], 0), r.state0, r.dtype);
    if (!r.state1.empty()) CheckBits("state1", StateValues(state[0], 1), r.state1, r.dtype);
    if (r.dtype != KV_FLOAT16) {
      CHECK(state[0].arrays.size() == slots);
      CheckBits("weight", Stored(k), r.weight, r.dtype);
      continue;
    }
    for (int64_t i = 0; i < k.Size(); ++i) {
      const uint16_t bits = reinterpret_cast<const uint16_t*>(k.stored.data())[i];
      CHECK_MSG(bits == r.weight16[i], "weight16[%lld] = 0x%04x, want 0x%04x",
                static_cast<long long>(i), bits, r.weight16[i]);
    }
    // Rows 2 and 3 are never pushed by STEPS: their master is still untaken (it is the
    // float16 weight, which the reference converts at creation), and a mask says so.
    const bool untaken = !r.interleaved;
    CHECK(state[0].arrays.size() == slots + (untaken ? 2 : 1));
    const std::vector<double> master = StateValues(state[0], slots);
    std::vector<double> mask(static_cast<size_t>(k.Size()), 1.0);
    if (untaken && state[0].arrays.size() == slots + 2) mask = StateValues(state[0], slots + 1);
    for (int64_t i = 0; i < k.Size(); ++i) {
      const bool taken = i / kCols != 2 && i / kCols != 3;
      CHECK_MSG(mask[i] == (untaken && !taken ? 0.0 : 1.0), "mask[%lld] = %g",
                static_cast<long long>(i), mask[i]);
      if (mask[i] == 0.0) continue;
      CHECK_MSG(static_cast<float>(master[i]) == static_cast<float>(r.master[i]),
                "master[%lld] = %.9g, want %.9g", static_cast<long long>(i), master[i],
                r.master[i]);
    }
  }
  check_set_context("%s", "");
}

// The same through a `local` store and the C ABI: row_sparse pushes to a dense stored
// value (the store sums them, gathers the rows, calls UpdateRows and scatters them back).
// With `save_at` >= 0 the job saves its optimizer states after that many steps and a fresh
// store, initialised with the pulled weights, loads them and takes the remaining steps.
class StoreJob {
 public:
  StoreJob(const Reference& r, const std::vector<uint8_t>* weights = nullptr) : r_(r) {
    REQUIRE_OK(KVStoreCreate("local", &store_));
    REQUIRE_OK(KVStoreSetOptimizer(store_, r.spec));
    std::vector<uint8_t> w0(kRows * kCols * ElemSize(r.dtype));
    for (int64_t i = 0; i < kRows * kCols; ++i) PutElem(w0.data(), r.dtype, i, Weight0(i));
    KVArrayHandle w = Dense(weights ? *weights : w0);
    REQUIRE_OK(KVStoreInit(store_, 1, &kKey, &w));
    REQUIRE_OK(KVArrayFree(w));
  }
  ~StoreJob() { KVStoreFree(store_); }

  // Step `step` of lazy_update_reference.py: row ids, or {-1} for a dense gradient.
  void Step(int step, const std::vector<int64_t>& rows) {
    const bool dense = !rows.empty() && rows[0] == -1;
    std::vector<int64_t> ids = rows;
    if (dense) {
      ids.clear();
      for (int64_t r = 0; r < kRows; ++r) ids.push_back(r);
    }
    std::vector<uint8_t> block(ids.size() * kCols * ElemSize(r_.dtype));
    for (size_t j = 0; j < ids.size(); ++j) {
      for (int64_t c = 0; c < kCols; ++c) {
        PutElem(block.data(), r_.dtype, static_cast<int64_t>(j) * kCols + c,
                GradValue(step, ids[j], c));
      }
    }
    KVArrayHandle g = nullptr;
    if (dense) {
      g = Dense(block);
    } else {
      REQUIRE_OK(KVArrayCreateRowSparse(kShape, 2, r_.dtype, KV_CPU, 0, ids.data(),
                                        static_cast<int64_t>(ids.size()), &g));
      if (!block.empty()) REQUIRE_OK(KVArrayCopyFromHost(g, block.data(), block.size()));
    }
    CHECK_OK(KVStorePush(store_, 1, &kKey, &g, 0));
    REQUIRE_OK(KVArrayFree(g));
  }
  std::vector<uint8_t> Pull() {
    std::vector<uint8_t> out(kRows * kCols * ElemSize(r_.dtype));
    KVArrayHandle a = Dense(out);
    CHECK_OK(KVStorePull(store_, 1, &kKey, &a, 0));
    REQUIRE_OK(KVArrayCopyToHost(a, out.data(), out.size()));
    REQUIRE_OK(KVArrayFree(a));
    return out;
  }
  KVStoreHandle handle() const { return store_; }

 private:
  KVArrayHandle Dense(const std::vector<uint8_t>& bytes) {
    KVArrayHandle a = nullptr;
    REQUIRE_OK(KVArrayCreate(kShape, 2, r_.dtype, KV_CPU, 0, &a));
    REQUIRE_OK(KVArrayCopyFromHost(a, bytes.data(), bytes.size()));
    return a;
  }

  static constexpr int64_t kShape[2] = {kRows, kCols};
  const Reference& r_;
  KVStoreHandle store_ = nullptr;
};

// The weights a job pulls at the end, against the reference's.
void CheckPulled(const Reference& r, const std::vector<uint8_t>& pulled) {
  if (r.dtype == KV_FLOAT16) {
    const uint16_t* bits = reinterpret_cast<const uint16_t*>(pulled.data());
    for (size_t i = 0; i < r.weight16.size(); ++i) {
      CHECK_MSG(bits[i] == r.weight16[i], "weight16[%zu] = 0x%04x, want 0x%04x", i, bits[i],
                r.weight16[i]);
    }
    return;
  }
  std::vector<double> got;
  for (int64_t i = 0; i < kRows * kCols; ++i) got.push_back(GetElem(pulled.data(), r.dtype, i));
  CheckBits("pulled", got, r.weight, r.dtype);
}

const std::vector<std::vector<int64_t>>& StepsOf(const Reference& r) {
  static const std::vector<std::vector<int64_t>> steps = {{1, 4}, {0, 1, 5}, {}, {4, 5}};
  static const std::vector<std::vector<int64_t>> interleaved = {{1, 4}, {-1}, {0, 4}, {-1}};
  return r.interleaved ? interleaved : steps;
}

void local_store_matches_reference() {
  for (const Reference& r : References()) {
    check_set_context("%s", r.label);
    StoreJob job(r);
    for (size_t s = 0; s < StepsOf(r).size(); ++s) job.Step(static_cast<int>(s), StepsOf(r)[s]);
    CheckPulled(r, job.Pull());
  }
  check_set_context("%s", "");
}

// Saved after two of the steps (an untaken master included: adam_mp), loaded into a fresh
// store: the last two steps end on the reference's weights, as without the break.
void local_store_save_load() {
  char dir[] = "/tmp/kvstore_lazy_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr, "mkdtemp %s", dir);
  const std::string path = std::string(dir) + "/states";
  for (const Reference& r : References()) {
    check_set_context("%s", r.label);
    std::vector<uint8_t> weights;
    {
      StoreJob first(r);
      first.Step(0, StepsOf(r)[0]);
      first.Step(1, StepsOf(r)[1]);
      CHECK_OK(KVStoreSaveOptimizerStates(first.handle(), path.c_str()));
      weights = first.Pull();
    }
    StoreJob second(r, &weights);
    CHECK_OK(KVStoreLoadOptimizerStates(second.handle(), path.c_str()));
    second.Step(2, StepsOf(r)[2]);
    second.Step(3, StepsOf(r)[3]);
    CheckPulled(r, second.Pull());
  }
  check_set_context("%s", "");
  std::remove(path.c_str());
  rmdir(dir);
}

// ---------------------------------------------------------------------------------------
// By hand, in binary fractions (exact in float32).

void hand_computed() {
  // sgd with momentum: mom = 0.5*mom - (0.5*0.25)*w - 0.5*g; w = w + mom.
  Key k("sgd(lr=0.5,momentum=0.5,wd=0.25)", KV_FLOAT32, {3, 2});
  for (int64_t i = 0; i < 6; ++i) PutElem(k.stored.data(), KV_FLOAT32, i, i + 1.0);
  // Step 0, row 1 = (3, 4), g = (0, 0.75): mom = (-0.375, -0.875), w = (2.625, 3.125).
  k.Rows(0, {1});
  CheckBits("sgd step 0", Stored(k), {1, 2, 2.625, 3.125, 5, 6}, KV_FLOAT32);
  CheckBits("mom step 0", StateValues(k.State()[0], 0), {0, 0, -0.375, -0.875, 0, 0}, KV_FLOAT32);
  // Step 1, rows 0 and 1, g = (0.5, 1.25) and (-1, -0.25):
  //   row 0: mom = (-0.125 - 0.25, -0.25 - 0.625) = (-0.375, -0.875), w = (0.625, 1.125)
  //   row 1: mom = (-0.1875 - 0.328125 + 0.5, -0.4375 - 0.390625 + 0.125)
  //              = (-0.015625, -0.703125), w = (2.609375, 2.421875)
  // Row 2 keeps its weight and its zero momentum (a dense step would decay it).
  k.Rows(1, {0, 1});
  CheckBits("sgd step 1", Stored(k), {0.625, 1.125, 2.609375, 2.421875, 5, 6}, KV_FLOAT32);
  CheckBits("mom step 1", StateValues(k.State()[0], 0),
            {-0.375, -0.875, -0.015625, -0.703125, 0, 0}, KV_FLOAT32);

  // sgd without momentum, the lazy rule of sgd_update: w = (1 - 0.5*0.25)*w - 0.5*g.
  Key p("sgd(lr=0.5,wd=0.25)", KV_FLOAT32, {3, 2});
  for (int64_t i = 0; i < 6; ++i) PutElem(p.stored.data(), KV_FLOAT32, i, i + 1.0);
  p.Rows(0, {1});  // 0.875*3 - 0 = 2.625, 0.875*4 - 0.375 = 3.125
  p.Rows(1, {0});  // 0.875*1 - 0.25 = 0.625, 0.875*2 - 0.625 = 1.125
  CheckBits("sgd", Stored(p), {0.625, 1.125, 2.625, 3.125, 5, 6}, KV_FLOAT32);
  CHECK(p.State().size() == 1 && p.State()[0].arrays.empty() && p.State()[0].steps == 2);
}

// UpdateRows on rows R and a dense Update whose gradient is zero outside R, from the same
// weight and state: the same values on R (the same bits where the reference's lazy kernel
// has the dense kernel's order of operations), while outside R the lazy update leaves
// weight and state alone and the dense one does not.
void rows_equal_dense_on_pushed_rows() {
  struct Spec {
    const char* spec;
    bool same_order;  // sgd with momentum, adam without clipping
  };
  for (const Spec& s : {Spec{"sgd(lr=0.1,momentum=0.9,wd=0.01,clip_gradient=0.3)", true},
                        Spec{"adam(lr=0.01,wd=0.01,rescale_grad=0.5)", true},
                        Spec{"sgd(lr=0.1,wd=0.01,rescale_grad=0.5)", false},
                        Spec{"adam(lr=0.01,wd=0.01,clip_gradient=0.2)", false}}) {
    for (int dtype : {KV_FLOAT32, KV_FLOAT64, KV_FLOAT16}) {
      check_set_context("%s %s", s.spec, kvstore::DTypeName(dtype));
      Key lazy(s.spec, dtype), dense(s.spec, dtype);
      lazy.Dense(0);  // a common first step, so that there is state outside the rows
      dense.Dense(0);
      const std::vector<double> before = Stored(lazy);
      const std::vector<opt::KeyRecord> state_before = lazy.State();
      const std::vector<int64_t> rows = {1, 4};
      lazy.Rows(1, rows);
      dense.Dense(1, &rows);
      const std::vector<double> a = Stored(lazy), b = Stored(dense);
      const std::vector<opt::KeyRecord> sa = lazy.State(), sb = dense.State();
      // Another order of rounding: a few ulps (float16 weights: one float16 ulp).
      const double tolerance = dtype == KV_FLOAT16 ? 2e-3 : 1e-6;
      for (int64_t i = 0; i < lazy.Size(); ++i) {
        const int64_t r = i / kCols;
        if (r == 1 || r == 4) {
          const bool ok = s.same_order ? a[i] == b[i]
                                       : std::fabs(a[i] - b[i]) <= tolerance * std::fabs(b[i]);
          CHECK_MSG(ok, "row %lld: lazy %.17g, dense %.17g", static_cast<long long>(r), a[i], b[i]);
          for (size_t j = 0; s.same_order && j < sa[0].arrays.size(); ++j) {
            CHECK(StateValues(sa[0], j)[i] == StateValues(sb[0], j)[i]);
          }
        } else {
          CHECK_MSG(a[i] == before[i], "row %lld moved: %.17g, was %.17g",
                    static_cast<long long>(r), a[i], before[i]);
          // (A float16 weight may not move by less than half its ulp.)
          CHECK_MSG(dtype == KV_FLOAT16 || b[i] != before[i],
                    "row %lld: the dense update did not move it", static_cast<long long>(r));
          for (size_t j = 0; j < sa[0].arrays.size(); ++j) {
            CHECK(StateValues(sa[0], j)[i] == StateValues(state_before[0], j)[i]);
          }
        }
      }
      CHECK(sa[0].steps == 2 && sb[0].steps == 2);
    }
  }
  check_set_context("%s", "");
}

// ---------------------------------------------------------------------------------------
// Transactions.

// A lazy update whose transaction is discarded changes no state (nor adam's step count);
// the next one that commits gives what it gives without the discarded one.
void discard() {
  for (const char* spec : {"adam(lr=0.01,wd=0.01)", "sgd(lr=0.1,momentum=0.9,wd=0.01)",
                           "adam(lr=0.01,multi_precision=1)"}) {
    check_set_context("%s", spec);
    const int dtype = std::strstr(spec, "multi_precision") ? KV_FLOAT16 : KV_FLOAT32;
    Key k(spec, dtype), plain(spec, dtype);
    k.Rows(0, {1, 4});
    plain.Rows(0, {1, 4});
    const std::vector<opt::KeyRecord> committed = k.State();
    const std::vector<uint8_t> stored = k.stored;
    {
      UpdateTxn txn;
      std::unique_ptr<Array> block;
      k.StageRows(1, {0, 1, 2}, &txn, &block);  // rows 2 and 0 untaken, row 1 taken
    }  // discarded: the caller drops the block
    CHECK(SameRecords(k.State(), committed));
    CHECK(k.stored == stored);
    // Commit after discard: as if the discarded update had never been staged.
    k.Rows(2, {0, 1});
    plain.Rows(2, {0, 1});
    CHECK(SameRecords(k.State(), plain.State()));
    CHECK(k.stored == plain.stored);
    // And a dense update after it too.
    k.Dense(3);
    plain.Dense(3);
    CHECK(SameRecords(k.State(), plain.State()));
    CHECK(k.stored == plain.stored);
  }
  check_set_context("%s", "");
}

// A key is staged once per transaction, whichever path stages it; the second is refused
// (INTERNAL) and the transaction, discarded, leaves the state as it was.
void one_entry_per_txn() {
  Key k("sgd(lr=0.1,momentum=0.9)", KV_FLOAT32);
  k.Rows(0, {1});
  const std::vector<opt::KeyRecord> committed = k.State();
  std::unique_ptr<Array> value = Array::Create(k.shape, KV_FLOAT32, kvstore::Context());
  std::unique_ptr<Array> grad = Array::Create(k.shape, KV_FLOAT32, kvstore::Context());
  {
    UpdateTxn txn;
    std::unique_ptr<Array> block;
    k.StageRows(1, {2}, &txn, &block);
    CHECK(ErrorOf([&] { k.updater->Update(kKey, nullptr, grad.get(), value.get(), &txn); }) ==
          KV_ERR_INTERNAL);
    CHECK(ErrorOf([&] { k.StageRows(1, {3}, &txn, &block); }) == KV_ERR_INTERNAL);
  }
  {
    UpdateTxn txn;
    k.updater->Update(kKey, nullptr, grad.get(), value.get(), &txn);
    std::unique_ptr<Array> block;
    std::string message;
    CHECK(ErrorOf([&] { k.StageRows(1, {2}, &txn, &block); }, &message) == KV_ERR_INTERNAL);
    CHECK_HAS(message, "neither committed nor discarded");
  }
  CHECK(SameRecords(k.State(), committed));
  // Different keys share a transaction: both commit together.
  {
    UpdateTxn txn;
    std::unique_ptr<Array> block;
    k.StageRows(1, {2}, &txn, &block);
    k.updater->Update(kKey + 1, nullptr, grad.get(), value.get(), &txn);
    txn.Commit();
  }
  const std::vector<opt::KeyRecord> both = k.State();
  CHECK(both.size() == 2 && both[0].steps == 2 && both[1].steps == 1);
}

// ---------------------------------------------------------------------------------------
// Multi-precision.

// A float16 key under multi_precision, updated lazily, densely and lazily again, holds the
// float16 rounding of a float32 key that started from the float16 values and took the same
// steps; the float32 master copy is that float32 key, bit for bit, wherever it is taken.
void multi_precision_matches_float32() {
  for (const char* spec : {"sgd(lr=0.1,momentum=0.9,wd=0.01,clip_gradient=0.3,multi_precision=1)",
                           "sgd(lr=0.1,wd=0.01,multi_precision=1)",
                           "adam(lr=0.01,wd=0.01,clip_gradient=0.2,multi_precision=1)"}) {
    check_set_context("%s", spec);
    Key h(spec, KV_FLOAT16), f(spec, KV_FLOAT32);
    for (int64_t i = 0; i < h.Size(); ++i) PutElem(f.stored.data(), KV_FLOAT32, i, h.At(i));
    const int slots = static_cast<int>(f.State().size());  // no state yet: 0
    CHECK(slots == 0);
    const std::vector<std::vector<int64_t>> lazy = {{1, 4}, {0, 1}, {}, {5}};
    for (size_t s = 0; s < lazy.size(); ++s) {
      h.Rows(static_cast<int>(s), lazy[s]);
      f.Rows(static_cast<int>(s), lazy[s]);
      if (s == 1) {  // a dense step takes the rest of the master from the weight
        h.Dense(10);
        f.Dense(10);
      }
    }
    for (int64_t i = 0; i < h.Size(); ++i) {
      const uint16_t want = kvstore::FloatToHalf(static_cast<float>(f.At(i)));
      CHECK_MSG(reinterpret_cast<const uint16_t*>(h.stored.data())[i] == want,
                "weight16[%lld]", static_cast<long long>(i));
    }
    const opt::KeyRecord hs = h.State()[0], fs = f.State()[0];
    CHECK(hs.arrays.size() == fs.arrays.size() + 1);  // the master, no mask (all taken)
    for (size_t j = 0; j < fs.arrays.size(); ++j) CHECK(hs.arrays[j].bytes == fs.arrays[j].bytes);
    CheckBits("master", StateValues(hs, fs.arrays.size()), Stored(f), KV_FLOAT32);
    CHECK(hs.steps == 5 && fs.steps == 5);
  }
  check_set_context("%s", "");
}

// ---------------------------------------------------------------------------------------
// Saving and loading.

opt::StatesFile SaveFile(const Key& k) {
  opt::StatesFile file;
  file.optimizer = k.Holder()->OptimizerName();
  file.spec = k.Holder()->Spec();
  file.keys = k.State();
  for (opt::KeyRecord& r : file.keys) {  // as a store does: the weight's real shape
    r.shape = k.shape;
    for (opt::StateArray& a : r.arrays) a.shape = k.shape;
  }
  return file;
}

// Saved after lazy updates (an untaken master included), loaded into a fresh optimizer
// with the saved weights: the same file again, and training goes on bit-identically.
void save_load_round_trip() {
  for (const char* spec : {"sgd(lr=0.1,momentum=0.9,wd=0.01)", "adam(lr=0.01,wd=0.01)",
                           "adam(lr=0.01,wd=0.01,multi_precision=1)",
                           "sgd(lr=0.1,wd=0.01,multi_precision=1)"}) {
    check_set_context("%s", spec);
    const int dtype = std::strstr(spec, "multi_precision") ? KV_FLOAT16 : KV_FLOAT32;
    Key a(spec, dtype);
    a.Rows(0, {1, 4});
    a.Rows(1, {0, 1, 5});
    const std::string bytes = opt::EncodeStatesFile(SaveFile(a));
    Key b(spec, dtype);
    b.stored = a.stored;
    opt::StatesFile file = opt::DecodeStatesFile(bytes, "saved");
    if (dtype == KV_FLOAT16) {  // rows 2 and 3 were never updated: the mask is saved
      CHECK(!file.keys.empty() && file.keys[0].arrays.back().dtype == KV_UINT8);
    }
    b.Holder()->LoadStates(&file, "saved", true);
    CHECK(opt::EncodeStatesFile(SaveFile(b)) == bytes);
    for (Key* k : {&a, &b}) {
      k->Rows(2, {2, 4});
      k->Dense(3);
      k->Rows(4, {3});
    }
    CHECK(a.stored == b.stored);
    CHECK(SameRecords(a.State(), b.State()));
  }
  check_set_context("%s", "");
}

// A mask byte other than 0 or 1, and a mask where the optimizer keeps no master, are
// refused, and the loading optimizer keeps its state.
void save_load_bad_mask() {
  Key a("adam(lr=0.01,multi_precision=1)", KV_FLOAT16);
  a.Rows(0, {1});
  Key b("adam(lr=0.01,multi_precision=1)", KV_FLOAT16);
  b.Rows(0, {2});
  const std::vector<opt::KeyRecord> kept = b.State();
  opt::StatesFile file = SaveFile(a);
  file.keys[0].arrays.back().bytes[0] = 2;
  std::string message;
  CHECK(ErrorOf([&] { b.Holder()->LoadStates(&file, "bad", true); }, &message) ==
        KV_ERR_INVALID_ARGUMENT);
  CHECK_HAS(message, "mask");
  CHECK(SameRecords(b.State(), kept));
  // Without multi_precision the float16 key keeps no master and no mask.
  Key c("adam(lr=0.01)", KV_FLOAT16);
  opt::StatesFile masked = SaveFile(a);
  CHECK(ErrorOf([&] { c.Holder()->LoadStates(&masked, "masked", true); }) ==
        KV_ERR_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------------------------------
// How optimizers want row_sparse sums, and refused calls.

void row_sparse_recv() {
  struct Want {
    const char* spec;
    RowSparseRecv recv;
  };
  for (const Want& w : {Want{"sgd", RowSparseRecv::kRows}, Want{"adam", RowSparseRecv::kRows},
                        Want{"sgd(momentum=0.9,lazy_update=1)", RowSparseRecv::kRows},
                        Want{"sgd(lazy_update=0)", RowSparseRecv::kDense},
                        Want{"adam(lazy_update=0)", RowSparseRecv::kDense},
                        Want{"nag(momentum=0.9)", RowSparseRecv::kDense},
                        Want{"adagrad", RowSparseRecv::kDense},
                        Want{"rmsprop", RowSparseRecv::kDense},
                        Want{"test", RowSparseRecv::kDense}}) {
    CHECK_MSG(kvstore::CreateOptimizer(w.spec)->row_sparse_recv() == w.recv, "%s", w.spec);
    CHECK_MSG(kvstore::OptimizerSpec(w.spec).row_sparse_recv() == w.recv, "%s", w.spec);
  }
  // Only sgd and adam take lazy_update, as in the reference's signatures.
  for (const char* spec : {"nag(lazy_update=1)", "adagrad(lazy_update=0)", "sgd(lazy_update=2)"}) {
    CHECK_MSG(ErrorOf([&] { kvstore::CreateOptimizer(spec); }) == KV_ERR_INVALID_ARGUMENT, "%s",
              spec);
  }
}

// Every refused call changes nothing: the key's state stays as committed.
void errors() {
  // An optimizer that applies row_sparse sums densely is never asked for rows.
  for (const char* spec : {"nag(momentum=0.9)", "sgd(lazy_update=0)", "test"}) {
    Key k(spec, KV_FLOAT32);
    UpdateTxn txn;
    std::unique_ptr<Array> block;
    CHECK_MSG(ErrorOf([&] { k.StageRows(0, {1}, &txn, &block); }) == KV_ERR_INTERNAL, "%s", spec);
  }
  Key k("adam(lr=0.01)", KV_FLOAT32);
  k.Rows(0, {1, 4});
  const std::vector<opt::KeyRecord> committed = k.State();
  const std::vector<uint8_t> stored = k.stored;
  struct Bad {
    std::vector<int64_t> rows;
    int code;
    const char* needle;
  };
  for (const Bad& bad : {Bad{{4, 1}, KV_ERR_INVALID_ARGUMENT, "sorted and unique"},
                         Bad{{1, 1}, KV_ERR_INVALID_ARGUMENT, "sorted and unique"},
                         Bad{{6}, KV_ERR_INVALID_ARGUMENT, "not in [0, 6)"},
                         Bad{{-1}, KV_ERR_INVALID_ARGUMENT, "not in [0, 6)"}}) {
    UpdateTxn txn;
    std::unique_ptr<Array> block;
    std::string message;
    CHECK(ErrorOf([&] { k.StageRows(1, bad.rows, &txn, &block); }, &message) == bad.code);
    CHECK_HAS(message, bad.needle);
  }
  UpdateTxn txn;
  const int64_t rows[] = {1, 2};
  std::unique_ptr<Array> w2 = Array::Create({2, kCols}, KV_FLOAT32, kvstore::Context());
  std::unique_ptr<Array> w3 = Array::Create({3, kCols}, KV_FLOAT32, kvstore::Context());
  std::unique_ptr<Array> g16 = Array::Create({2, kCols}, KV_FLOAT16, kvstore::Context());
  std::unique_ptr<Array> g3 = Array::Create({2, 3}, KV_FLOAT32, kvstore::Context());
  Updater& u = *k.updater;
  const Shape shape = k.shape;
  std::string message;
  // A block of another number of rows, a gradient of another dtype or row length.
  CHECK(ErrorOf([&] { u.UpdateRows(kKey, nullptr, shape, rows, 2, *w2, w3.get(), &txn); }) != 0);
  CHECK(ErrorOf([&] { u.UpdateRows(kKey, nullptr, shape, rows, 2, *g16, w2.get(), &txn); },
                &message) != 0);
  CHECK_HAS(message, "gradient rows of key 7");
  CHECK(ErrorOf([&] { u.UpdateRows(kKey, nullptr, shape, rows, 2, *g3, w2.get(), &txn); }) != 0);
  // A stored value of another size than the key's state (SHAPE_MISMATCH), a scalar, nulls.
  const Shape other = {kRows + 1, kCols};
  CHECK(ErrorOf([&] { u.UpdateRows(kKey, nullptr, other, rows, 2, *w2, w2.get(), &txn); }) ==
        KV_ERR_SHAPE_MISMATCH);
  CHECK(ErrorOf([&] { u.UpdateRows(kKey, nullptr, Shape{}, rows, 0, *w2, w2.get(), &txn); }) ==
        KV_ERR_INVALID_ARGUMENT);
  CHECK(ErrorOf([&] { u.UpdateRows(kKey, nullptr, shape, nullptr, 2, *w2, w2.get(), &txn); }) ==
        KV_ERR_NULL_POINTER);
  CHECK(ErrorOf([&] { u.UpdateRows(kKey, nullptr, shape, rows, 2, *w2, nullptr, &txn); }) ==
        KV_ERR_NULL_POINTER);
  txn.Commit();  // nothing was staged
  CHECK(SameRecords(k.State(), committed));
  CHECK(k.stored == stored);
  // Integer weights: sgd and adam cannot update them.
  std::unique_ptr<Array> i2 = Array::Create({2, kCols}, KV_INT32, kvstore::Context());
  UpdateTxn txn2;
  CHECK(ErrorOf([&] { u.UpdateRows(kKey + 1, nullptr, shape, rows, 2, *i2, i2.get(), &txn2); }) ==
        KV_ERR_NOT_SUPPORTED);
  CHECK(k.State().size() == 1);
}

// String keys have their own state, as with Update.
void string_keys() {
  Key k("sgd(lr=0.1,momentum=0.9)", KV_FLOAT32);
  std::unique_ptr<Array> w = Array::Create({1, kCols}, KV_FLOAT32, kvstore::Context());
  std::unique_ptr<Array> g = Array::Create({1, kCols}, KV_FLOAT32, kvstore::Context());
  for (int64_t c = 0; c < kCols; ++c) PutElem(g->data(), KV_FLOAT32, c, 1.0);
  const int64_t row = 3;
  UpdateTxn txn;
  k.updater->UpdateRows(kKey, "embedding", k.shape, &row, 1, *g, w.get(), &txn);
  txn.Commit();
  const std::vector<opt::KeyRecord> state = k.State();
  CHECK(state.size() == 1 && state[0].is_str && state[0].str_key == "embedding");
  CHECK(StateValues(state[0], 0)[3 * kCols] != 0 && StateValues(state[0], 0)[2 * kCols] == 0);
}

// Many rows take the worker pool's parallel path (ctest runs this with 4 pool threads): the
// result is the dense kernel's on the pushed rows, and every other row is untouched.
void large_array() {
  const char* spec = "sgd(lr=0.1,momentum=0.9,wd=0.01)";
  const Shape shape = {60000, 16};
  Key lazy(spec, KV_FLOAT32, shape), dense(spec, KV_FLOAT32, shape);
  std::vector<int64_t> rows;
  for (int64_t r = 1; r < shape[0]; r += 3) rows.push_back(r);
  lazy.Rows(0, rows);
  dense.Dense(0, &rows);
  const int64_t len = shape[1];
  bool same = true, untouched = true;
  for (int64_t i = 0; i < lazy.Size(); ++i) {
    if ((i / len) % 3 == 1) same &= lazy.At(i) == dense.At(i);
    else untouched &= lazy.At(i) == Weight0(i);
  }
  CHECK(same);
  CHECK(untouched);
}

// Blocks on a GPU are updated through host copies, as dense values are: the same bits as
// blocks in host memory. Skipped (status 77) without a GPU.
void gpu_blocks() {
  int gpus = 0;
  CHECK_OK(KVGetGpuCount(&gpus));
  if (gpus == 0) {
    check_skip("no GPU");
    return;
  }
  const char* spec = "adam(lr=0.01,wd=0.01,clip_gradient=0.2)";
  Key host(spec, KV_FLOAT32), fresh(spec, KV_FLOAT32);
  const std::vector<int64_t> rows = {0, 3, 5};
  host.Rows(0, rows);
  // The same step with the scratch block and the gradient on GPU 0.
  const Shape bshape = {static_cast<int64_t>(rows.size()), kCols};
  std::unique_ptr<Array> w_host = Array::Create(bshape, KV_FLOAT32, kvstore::Context());
  std::unique_ptr<Array> g_host = Array::Create(bshape, KV_FLOAT32, kvstore::Context());
  const size_t row_bytes = kCols * sizeof(float);
  for (size_t j = 0; j < rows.size(); ++j) {
    std::memcpy(static_cast<uint8_t*>(w_host->data()) + j * row_bytes,
                fresh.stored.data() + rows[j] * row_bytes, row_bytes);
    for (int64_t c = 0; c < kCols; ++c) {
      PutElem(g_host->data(), KV_FLOAT32, static_cast<int64_t>(j) * kCols + c,
              GradValue(0, rows[j], c));
    }
  }
  const kvstore::Context dev{KV_GPU, 0};
  std::unique_ptr<Array> w_dev = Array::Create(bshape, KV_FLOAT32, dev);
  std::unique_ptr<Array> g_dev = Array::Create(bshape, KV_FLOAT32, dev);
  kvstore::CopyArray(w_dev.get(), *w_host);
  kvstore::CopyArray(g_dev.get(), *g_host);
  UpdateTxn dev_txn;
  fresh.updater->UpdateRows(kKey, nullptr, fresh.shape, rows.data(),
                            static_cast<int64_t>(rows.size()), *g_dev, w_dev.get(), &dev_txn);
  dev_txn.Commit();
  kvstore::CopyArray(w_host.get(), *w_dev);
  fresh.Scatter(rows, *w_host);
  CHECK(fresh.stored == host.stored);
  CHECK(SameRecords(fresh.State(), host.State()));
}

const TestCase kCases[] = {
    {"matches_reference", matches_reference},
    {"local_store_matches_reference", local_store_matches_reference},
    {"local_store_save_load", local_store_save_load},
    {"hand_computed", hand_computed},
    {"rows_equal_dense_on_pushed_rows", rows_equal_dense_on_pushed_rows},
    {"discard", discard},
    {"one_entry_per_txn", one_entry_per_txn},
    {"multi_precision_matches_float32", multi_precision_matches_float32},
    {"save_load_round_trip", save_load_round_trip},
    {"save_load_bad_mask", save_load_bad_mask},
    {"row_sparse_recv", row_sparse_recv},
    {"errors", errors},
    {"string_keys", string_keys},
    {"large_array", large_array},
    {"gpu_blocks", gpu_blocks},
};

}  // namespace

int main(int argc, char** argv) { return RunCases(argc, argv, kCases); }
