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

    KeyState* state = states_.Get(key, str_key, *stored, weight);
    std::lock_guard<std::mutex> lock(state->mu);
    KV_CHECK(!state->staged, KV_ERR_INTERNAL,
             "optimizer %s: key %s already has an update that was neither committed nor "
             "discarded", def_.name, KeyName(key, str_key).c_str());
    txn->Add(state);  // from here on the caller's txn ends what this call stages
    Apply(state, grad, weight);
    state->staged = true;
    if (!on_host) CopyArray(stored, *host_w);
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
}

void OptimizerSpec::CheckDType(int dtype, const std::string& key) const {
  optimizer::CheckDTypeOf(name_, updates_integers_, dtype, key);
}

}  // namespace kvstore
