// optimizer.cc - the built-in optimizers (sgd, nag, adam, adagrad, rmsprop, test) as
// updaters, and the factory that makes one from a spec string.
//
// The update rules are those of the reference implementation, Apache MXNet 1.9.1, as its
// Python optimizers run them from a kvstore updater (docs/OPTIMIZERS.md writes each out).
// The pieces: registry.{h,cc} is the table of optimizers and parameters and resolves a spec
// against it; kernels.{h,cc} are the element loops, bit-exact with the reference;
// key_state.{h,cc} is the transactional per-key state. This file is the Updater that ties
// them together: it checks a push's arguments, finds the key's state, stages arrays that are
// not on the CPU through host copies, and splits large updates over the CPU worker pool.
//
// Arithmetic runs in float for float16/float32 weights and in double for float64 weights;
// optimizer state is kept in that compute type (so float16 weights get float32 state).
//
// Multi-precision (multi_precision=1): a float16 key receives its gradient as the float32
// sum of the pushed values (RecvDType; the store or server forms it, recv_sum.h), the step
// runs in float32 on the key's float32 master copy (key_state.h), and the stored value
// becomes the new master rounded to float16. That is MXNet's update_multi_precision: the
// float32 optimizer on the master copy, then cast(master, float16).
//
// Lazy updates (lazy_update=1, sgd and adam; row_sparse_recv() is then kRows): the store
// hands UpdateRows the summed row_sparse gradient of some rows and a scratch block of those
// rows of the weight; the reference's lazy kernels (ApplyRowsKernel) update the block and
// only those rows of the state, staged as row blocks (key_state.h), so the cost is that of
// the rows. A key's adam step count t counts its lazy and dense updates alike (an update
// of no rows included), as the reference's per-index update count does.
#include "optimizer/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "core/array.h"
#include "core/cpu/worker_pool.h"
#include "core/dtype.h"
#include "core/error.h"
#include "optimizer/kernels.h"
#include "optimizer/key_state.h"
#include "optimizer/registry.h"
#include "optimizer/states.h"

namespace kvstore {
namespace optimizer {
namespace {

// Whether the optimizer can update integer values: only test's exact addition can.
bool UpdatesIntegers(const OptimizerDef& def, const Hyper& hyper) {
  return def.kind == Kind::kTest && hyper.rescale_grad == 1;
}

void CheckDTypeOf(const char* name, bool updates_integers, int dtype, const std::string& key) {
  if (!IsIntegerDType(dtype)) return;
  KV_CHECK(updates_integers, KV_ERR_NOT_SUPPORTED,
           "optimizer %s cannot update key %s of integer dtype %s (only test with "
           "rescale_grad=1 can)", name, key.c_str(), DTypeName(dtype));
}

class OptimizerUpdater final : public Updater, public StateHolder {
 public:
  OptimizerUpdater(const OptimizerDef& def, const Hyper& hyper)
      : def_(def), hyper_(hyper), op_(OperatorValues(def, hyper)),
        num_slots_(NumSlots(def.kind, hyper)), multi_precision_(hyper.multi_precision != 0),
        states_(def.name, num_slots_, multi_precision_) {}

  void Update(int key, const char* str_key, Array* recv, Array* stored,
              UpdateTxn* txn) override {
    try {
      UpdateImpl(key, str_key, recv, stored, txn);
    } catch (const std::bad_alloc&) {
      // Only reachable after the argument checks: stored is not null.
      KV_FAIL(KV_ERR_OUT_OF_MEMORY, "optimizer %s: out of memory for the state of key %s (%s)",
              def_.name, KeyName(key, str_key).c_str(), stored->Describe().c_str());
    }
  }

  void CheckDType(int dtype, const std::string& key) const override {
    CheckDTypeOf(def_.name, UpdatesIntegers(def_, hyper_), dtype, key);
  }

  int RecvDType(int dtype) const override {
    return multi_precision_ && dtype == KV_FLOAT16 ? KV_FLOAT32 : dtype;
  }

  RowSparseRecv row_sparse_recv() const override {
    return LazyRows(def_, hyper_) ? RowSparseRecv::kRows : RowSparseRecv::kDense;
  }

  void UpdateRows(int key, const char* str_key, const Shape& shape, const int64_t* row_ids,
                  int64_t n, const Array& grad, Array* weight, UpdateTxn* txn) override {
    try {
      UpdateRowsImpl(key, str_key, shape, row_ids, n, grad, weight, txn);
    } catch (const std::bad_alloc&) {
      KV_FAIL(KV_ERR_OUT_OF_MEMORY, "optimizer %s: out of memory for the state of key %s (%lld "
              "rows of a value of shape %s)", def_.name, KeyName(key, str_key).c_str(),
              static_cast<long long>(n), ShapeToString(shape).c_str());
    }
  }

  // StateHolder (states.h): the optimizer must match; hyper-parameters may differ.
  const char* OptimizerName() const override { return def_.name; }
  std::string Spec() const override { return CanonicalSpec(def_, hyper_); }
  std::vector<KeyRecord> SaveStates() override { return states_.Save(); }
  void LoadStates(StatesFile* file, const std::string& path, bool apply) override {
    KV_CHECK(file->optimizer == def_.name, KV_ERR_INVALID_ARGUMENT,
             "optimizer states file '%s' holds the state of %s but the store's optimizer is %s",
             path.c_str(), file->spec.c_str(), Spec().c_str());
    states_.Restore(&file->keys, path, apply);
  }

 private:
  void UpdateImpl(int key, const char* str_key, Array* recv, Array* stored, UpdateTxn* txn) {
    KV_CHECK(recv != nullptr && stored != nullptr && txn != nullptr, KV_ERR_NULL_POINTER,
             "optimizer %s: key %s: null argument", def_.name, KeyName(key, str_key).c_str());
    const int dtype = stored->dtype();
    const int recv_dtype = RecvDType(dtype);
    if (recv->shape() != stored->shape() || recv->dtype() != recv_dtype) {
      // A store that ignored RecvDType would hand over a sum already rounded to float16.
      CheckShapeDType(stored->shape(), recv_dtype, *recv,
                      StrFormat("gradient of key %s%s", KeyName(key, str_key).c_str(),
                                recv_dtype != dtype
                                    ? " (multi_precision: the float32 sum of the float16 pushes)"
                                    : ""));
    }
    CheckDType(dtype, KeyName(key, str_key));

    // Arrays not on the CPU are staged through host copies, made before the state is
    // touched. The copy back may fail after the state was staged; the caller then discards
    // the txn, so the committed state is untouched.
    const bool on_host = stored->ctx().is_cpu() && recv->ctx().is_cpu();
    std::unique_ptr<Array> host_w, host_g;
    if (!on_host) {
      const Context host;
      host_w = Array::Create(stored->shape(), dtype, host);
      host_g = Array::Create(recv->shape(), recv->dtype(), host);
      CopyArray(host_w.get(), *stored);
      CopyArray(host_g.get(), *recv);
    }
    void* weight = on_host ? stored->data() : host_w->data();
    const void* grad = on_host ? recv->data() : host_g->data();

    KeyState* state = states_.Get(key, str_key, dtype, stored->shape(), weight);
    std::lock_guard<std::mutex> lock(state->mu);
    CheckNotStaged(*state, key, str_key);
    // A master that lazy updates left partly untaken is taken whole from the stored value.
    if (state->master >= 0) state->TakeMaster(static_cast<const uint16_t*>(weight));
    txn->Add(state);  // from here on the caller's txn ends what this call stages
    Apply(state, grad, weight);
    state->staged = true;
    state->staged_rows = false;
    if (!on_host) CopyArray(stored, *host_w);
  }

  void CheckNotStaged(const KeyState& state, int key, const char* str_key) const {
    KV_CHECK(!state.staged, KV_ERR_INTERNAL,
             "optimizer %s: key %s already has an update that was neither committed nor "
             "discarded", def_.name, KeyName(key, str_key).c_str());
  }

  // Checks a lazy update's arguments (Updater::UpdateRows) and returns the elements per row.
  int64_t CheckRows(int key, const char* str_key, const Shape& shape, const int64_t* row_ids,
                    int64_t n, const Array& grad, const Array* weight, const UpdateTxn* txn) const {
    const std::string name = KeyName(key, str_key);
    KV_CHECK(row_sparse_recv() == RowSparseRecv::kRows, KV_ERR_INTERNAL,
             "optimizer %s: key %s: UpdateRows called but the optimizer applies row_sparse "
             "gradients densely (lazy_update=0)", def_.name, name.c_str());
    KV_CHECK(weight != nullptr && txn != nullptr && (row_ids != nullptr || n == 0),
             KV_ERR_NULL_POINTER, "optimizer %s: key %s: null argument", def_.name, name.c_str());
    KV_CHECK(!shape.empty(), KV_ERR_INVALID_ARGUMENT,
             "optimizer %s: key %s: a lazy update needs a stored value with rows, not a scalar",
             def_.name, name.c_str());
    KV_CHECK(n >= 0 && n <= shape[0], KV_ERR_INVALID_ARGUMENT,
             "optimizer %s: key %s: %lld rows of a stored value of shape %s", def_.name,
             name.c_str(), static_cast<long long>(n), ShapeToString(shape).c_str());
    for (int64_t j = 0; j < n; ++j) {
      KV_CHECK(row_ids[j] >= 0 && row_ids[j] < shape[0] && (j == 0 || row_ids[j] > row_ids[j - 1]),
               KV_ERR_INVALID_ARGUMENT,
               "optimizer %s: key %s: row id %lld (position %lld) is not in [0, %lld) or not "
               "above the one before (row ids must be sorted and unique)", def_.name,
               name.c_str(), static_cast<long long>(row_ids[j]), static_cast<long long>(j),
               static_cast<long long>(shape[0]));
    }
    Shape block = shape;
    block[0] = n;
    const int dtype = weight->dtype();
    CheckShapeDType(block, dtype, *weight, StrFormat("weight rows of key %s", name.c_str()));
    CheckShapeDType(block, RecvDType(dtype), grad,
                    StrFormat("gradient rows of key %s%s", name.c_str(),
                              RecvDType(dtype) != dtype
                                  ? " (multi_precision: the float32 sum of the float16 pushes)"
                                  : ""));
    CheckDType(dtype, name);
    Shape row_shape(shape.begin() + 1, shape.end());
    return ShapeSize(row_shape);
  }

  void UpdateRowsImpl(int key, const char* str_key, const Shape& shape, const int64_t* row_ids,
                      int64_t n, const Array& grad, Array* weight, UpdateTxn* txn) {
    const int64_t row_len = CheckRows(key, str_key, shape, row_ids, n, grad, weight, txn);
    const int dtype = weight->dtype();
    // Blocks not on the CPU are staged through host copies, as in Update.
    const bool on_host = weight->ctx().is_cpu() && grad.ctx().is_cpu();
    std::unique_ptr<Array> host_w, host_g;
    if (!on_host) {
      const Context host;
      host_w = Array::Create(weight->shape(), dtype, host);
      host_g = Array::Create(grad.shape(), grad.dtype(), host);
      CopyArray(host_w.get(), *weight);
      CopyArray(host_g.get(), grad);
    }
    void* w = on_host ? weight->data() : host_w->data();
    const void* g = on_host ? grad.data() : host_g->data();

    KeyState* state = states_.Get(key, str_key, dtype, shape, nullptr);
    std::lock_guard<std::mutex> lock(state->mu);
    CheckNotStaged(*state, key, str_key);
    txn->Add(state);  // from here on the caller's txn ends what this call stages
    const int arrays = IsIntegerDType(dtype) ? 0 : num_slots_ + (state->master >= 0 ? 1 : 0);
    state->StageRows(row_ids, n, row_len, arrays);
    ApplyRows(state, g, w);
    state->staged = true;
    state->staged_rows = true;
    if (!on_host) CopyArray(weight, *host_w);
  }

  // Runs the lazy kernel on the staged rows (host memory). Never throws.
  void ApplyRows(KeyState* state, const void* grad, void* weight) {
    if (state->master >= 0) {
      RunRowsMaster(state, static_cast<half_t*>(weight), static_cast<const float*>(grad));
      return;
    }
    switch (state->dtype) {
      case KV_FLOAT32: RunRows<float>(state, weight, grad); break;
      case KV_FLOAT64: RunRows<double>(state, weight, grad); break;
      case KV_FLOAT16: RunRows<half_t>(state, weight, grad); break;
      default: break;  // CheckRows refused integers (sgd and adam cannot update them)
    }
  }

  // Calls range(begin, end) over the rows [0, rows), split over the CPU worker pool when the
  // traffic (bytes per row) makes it worth it. Rows are independent.
  template <typename F>
  static void ForRows(int64_t rows, size_t row_bytes, const F& range) {
    WorkerPool& pool = WorkerPool::Instance();
    if (static_cast<size_t>(rows) * row_bytes < pool.parallel_min_bytes() || pool.width() == 1) {
      range(0, rows);
      return;
    }
    const int parts = pool.width();
    pool.ParallelFor(parts, [&](int part) {
      int64_t begin, end;
      SplitRange(rows, parts, part, 1, &begin, &end);
      if (begin < end) range(begin, end);
    });
  }

  template <typename W>
  void RunRows(KeyState* state, void* weight, const void* grad) {
    using C = typename ComputeType<W>::type;
    const StepParams<C> p = Params<C>(StepLr(*state));
    W* w = static_cast<W*>(weight);
    const W* g = static_cast<const W*>(grad);
    const int64_t len = state->row_len;
    ForRows(static_cast<int64_t>(state->rows.size()),
            static_cast<size_t>(len) * (3 * sizeof(W) + 2 * num_slots_ * sizeof(C)),
            [&](int64_t begin, int64_t end) {
              for (int64_t j = begin; j < end; ++j) {
                ApplyRowsKernel<W, C>(def_.kind, p, w + j * len, g + j * len,
                                      state->RowSlotsFor<C>(num_slots_, j), len);
              }
            });
  }

  // Multi-precision float16 rows: the staged master row starts as the committed one (or,
  // untaken, as the row's float16 weight converted exactly), the float32 lazy kernel
  // updates it, and the weight row becomes its float16 rounding.
  void RunRowsMaster(KeyState* state, half_t* weight, const float* grad) {
    const StepParams<float> p = Params<float>(StepLr(*state));
    const int64_t len = state->row_len;
    const float* master_in = state->f[0][state->master].data();
    float* master = state->rf[state->master].data();
    const uint8_t* taken = state->master_taken.empty() ? nullptr : state->master_taken.data();
    auto range = [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        const int64_t at = state->rows[static_cast<size_t>(j)] * len;
        float* m = master + j * len;
        half_t* w = weight + j * len;
        for (int64_t k = 0; k < len; ++k) {
          m[k] = taken == nullptr || taken[at + k] ? master_in[at + k] : HalfToFloat(w[k].bits);
        }
        ApplyRowsKernel<float, float>(def_.kind, p, m, grad + j * len,
                                      state->RowSlotsFor<float>(num_slots_, j), len);
        for (int64_t k = 0; k < len; ++k) w[k] = half_t{FloatToHalf(m[k])};
      }
    };
    ForRows(static_cast<int64_t>(state->rows.size()),
            static_cast<size_t>(len) *
                (sizeof(half_t) + 3 * sizeof(float) + 2 * num_slots_ * sizeof(float)),
            range);
  }

  // The learning rate of the next step of `state` as the reference's kernel receives it.
  double StepLr(const KeyState& state) const {
    if (def_.kind != Kind::kAdam) return op_.learning_rate;
    // Bias correction in double, as the Python Adam computes it, then the operator's float32.
    const double t = static_cast<double>(state.steps + 1);
    return RoundToFloat32(hyper_.learning_rate * (std::sqrt(1.0 - std::pow(hyper_.beta2, t)) /
                                                  (1.0 - std::pow(hyper_.beta1, t))));
  }

  // The step's hyper-parameters in the compute type C (exact conversions of op_).
  template <typename C>
  StepParams<C> Params(double lr) const {
    StepParams<C> p;
    p.lr = static_cast<C>(lr);
    p.wd = static_cast<C>(op_.wd);
    p.rescale = static_cast<C>(op_.rescale_grad);
    p.clip = static_cast<C>(op_.clip_gradient);
    p.clip_on = std::isfinite(op_.clip_gradient);
    p.momentum = static_cast<C>(op_.momentum);
    p.beta1 = static_cast<C>(op_.beta1);
    p.beta2 = static_cast<C>(op_.beta2);
    p.eps = static_cast<C>(op_.epsilon);
    p.gamma1 = static_cast<C>(op_.gamma1);
    p.gamma2 = static_cast<C>(op_.gamma2);
    p.clip_w = static_cast<C>(op_.clip_weights);
    return p;
  }

  // Runs the kernel on host memory into the staging state. Never throws (every check
  // happened before).
  void Apply(KeyState* state, const void* grad, void* weight) {
    const int64_t n = state->size;
    if (state->master >= 0) {
      RunMaster(state, static_cast<half_t*>(weight), static_cast<const float*>(grad), n);
      return;
    }
    switch (state->dtype) {
      case KV_FLOAT32: Run<float>(state, weight, grad, n); break;
      case KV_FLOAT64: Run<double>(state, weight, grad, n); break;
      case KV_FLOAT16: Run<half_t>(state, weight, grad, n); break;
      // The only integer updates CheckDType lets through are test's exact additions.
      default: IntegerAdd(state->dtype, weight, grad, n); break;
    }
  }

  // Large arrays are split over the shared CPU worker pool. Elements are independent, so
  // the result does not depend on the split.
  template <typename W>
  void Run(KeyState* state, void* weight, const void* grad, int64_t n) {
    using C = typename ComputeType<W>::type;
    const StepParams<C> p = Params<C>(StepLr(*state));
    W* w = static_cast<W*>(weight);
    const W* g = static_cast<const W*>(grad);
    const Slots<C> slots = state->SlotsFor<C>(num_slots_);
    WorkerPool& pool = WorkerPool::Instance();
    // weight read and written, gradient read, each state slot read and written
    const size_t traffic = static_cast<size_t>(n) * (3 * sizeof(W) + 2 * num_slots_ * sizeof(C));
    if (traffic < pool.parallel_min_bytes() || pool.width() == 1) {
      ApplyKernel<W, C>(def_.kind, p, w, g, slots, n);
      return;
    }
    const int parts = pool.width();
    pool.ParallelFor(parts, [&](int part) {
      int64_t begin, end;
      SplitRange(n, parts, part, 64, &begin, &end);
      if (begin >= end) return;
      ApplyKernel<W, C>(def_.kind, p, w + begin, g + begin, slots.Offset(begin), end - begin);
    });
  }

  // Multi-precision float16: per range, the staged master starts as the committed one, the
  // float32 kernel updates it with the float32 gradient, and the weight becomes its float16
  // rounding. Split over the pool like Run.
  void RunMaster(KeyState* state, half_t* weight, const float* grad, int64_t n) {
    const StepParams<float> p = Params<float>(StepLr(*state));
    const Slots<float> slots = state->SlotsFor<float>(num_slots_);
    const float* master_in = state->f[0][state->master].data();
    float* master = state->f[1][state->master].data();
    auto range = [&](int64_t begin, int64_t end) {
      std::copy(master_in + begin, master_in + end, master + begin);
      ApplyKernel<float, float>(def_.kind, p, master + begin, grad + begin, slots.Offset(begin),
                                end - begin);
      for (int64_t i = begin; i < end; ++i) weight[i] = half_t{FloatToHalf(master[i])};
    };
    WorkerPool& pool = WorkerPool::Instance();
    // weight written, gradient read, master read and written, each state slot read and written
    const size_t traffic = static_cast<size_t>(n) *
                           (sizeof(half_t) + 3 * sizeof(float) + 2 * num_slots_ * sizeof(float));
    if (traffic < pool.parallel_min_bytes() || pool.width() == 1) {
      range(0, n);
      return;
    }
    const int parts = pool.width();
    pool.ParallelFor(parts, [&](int part) {
      int64_t begin, end;
      SplitRange(n, parts, part, 64, &begin, &end);
      if (begin < end) range(begin, end);
    });
  }

  const OptimizerDef& def_;
  const Hyper hyper_;  // as the spec gave them
  const Hyper op_;     // as the reference's kernels receive them (OperatorValues)
  const int num_slots_;
  const bool multi_precision_;
  StateTable states_;
};

}  // namespace
}  // namespace optimizer

std::shared_ptr<Updater> CreateOptimizer(const std::string& spec) {
  const optimizer::ResolvedSpec resolved = optimizer::ResolveSpec(spec);
  return std::make_shared<optimizer::OptimizerUpdater>(*resolved.def, resolved.hyper);
}

// The same resolution as CreateOptimizer, so the same errors; only what CheckDType needs is kept.
OptimizerSpec::OptimizerSpec(const std::string& spec) {
  const optimizer::ResolvedSpec resolved = optimizer::ResolveSpec(spec);
  name_ = resolved.def->name;
  updates_integers_ = optimizer::UpdatesIntegers(*resolved.def, resolved.hyper);
  lazy_rows_ = optimizer::LazyRows(*resolved.def, resolved.hyper);
}

void OptimizerSpec::CheckDType(int dtype, const std::string& key) const {
  optimizer::CheckDTypeOf(name_, updates_integers_, dtype, key);
}

}  // namespace kvstore
