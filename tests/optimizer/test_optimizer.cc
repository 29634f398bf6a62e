// test_optimizer.cc - the built-in optimizers through the public C API: a `local` store,
// KVStoreSetOptimizer, then init / push gradients / pull, compared with values computed by
// hand from the reference (MXNet 1.9.1) formulas written out in docs/OPTIMIZERS.md. The
// arithmetic is in the comments; every scenario is chosen so that the usual variants of a
// formula (clip before or after weight decay, epsilon inside or outside the square root,
// missing bias correction, momentum in weight or gradient units) give different numbers.
//
// Usage: test_optimizer [case]   (no argument runs every case)
#include <atomic>
#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../common/cases.h"
#include "../common/check.h"
#include "kvstore/kvstore.h"

namespace {

// ---------------------------------------------------------------------------------------
// Small RAII helpers over the C API.

struct Array {
  KVArrayHandle h = nullptr;
  Array(int dtype, size_t n) {
    int64_t shape[1] = {static_cast<int64_t>(n)};
    CHECK_OK(KVArrayCreate(shape, 1, dtype, KV_CPU, 0, &h));
  }
  ~Array() { KVArrayFree(h); }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  template <typename T> void Set(const std::vector<T>& v) {
    CHECK_OK(KVArrayCopyFromHost(h, v.data(), v.size() * sizeof(T)));
  }
  template <typename T> std::vector<T> Get(size_t n) {
    std::vector<T> v(n);
    CHECK_OK(KVArrayCopyToHost(h, v.data(), n * sizeof(T)));
    return v;
  }
};

struct Store {
  KVStoreHandle h = nullptr;
  explicit Store(const char* type = "local") { CHECK_OK(KVStoreCreate(type, &h)); }
  ~Store() { KVStoreFree(h); }
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
};

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr int value = KV_FLOAT32; };
template <> struct DTypeOf<double> { static constexpr int value = KV_FLOAT64; };
template <> struct DTypeOf<uint16_t> { static constexpr int value = KV_FLOAT16; };  // bits
template <> struct DTypeOf<int32_t> { static constexpr int value = KV_INT32; };
template <> struct DTypeOf<int64_t> { static constexpr int value = KV_INT64; };
template <> struct DTypeOf<uint8_t> { static constexpr int value = KV_UINT8; };

// A store with the optimizer `spec` and one int key initialised to w0.
template <typename T>
struct Fixture {
  Store store;
  std::vector<int> keys;
  size_t n;

  Fixture(const char* spec, const std::vector<T>& w0, int num_keys = 1) : n(w0.size()) {
    CHECK_OK(KVStoreSetOptimizer(store.h, spec));
    for (int k = 0; k < num_keys; ++k) {
      keys.push_back(k);
      Array a(DTypeOf<T>::value, n);
      a.Set(w0);
      CHECK_OK(KVStoreInit(store.h, 1, &k, &a.h));
    }
  }
  // Pushes one gradient for `key`; returns the push's status.
  int Push(const std::vector<T>& g, int key = 0) {
    Array a(DTypeOf<T>::value, n);
    a.Set(g);
    return KVStorePush(store.h, 1, &key, &a.h, 0);
  }
  std::vector<T> Pull(int key = 0) {
    Array a(DTypeOf<T>::value, n);
    CHECK_OK(KVStorePull(store.h, 1, &key, &a.h, 0));
    return a.Get<T>(n);
  }
};

constexpr double kF32 = 1e-5;   // a few float32 ulps at the magnitudes used here
constexpr double kF64 = 1e-12;
// float64 weights under sgd, nag, adam and rmsprop see float32-rounded hyper-parameters, as
// in the reference (its fused operators take float32 fields): lr 0.1 acts as 0.10000000149.
// Hand-derived values in exact decimals then hold to this; the matches_reference_* cases
// check every bit.
constexpr double kF64Hyper = 1e-7;

// ---------------------------------------------------------------------------------------
// sgd

void TestSgdPlain() {
  // sgd(lr=0.1, wd=0.01, rescale_grad=0.5, clip_gradient=1), float32.
  // g' = clip(0.5 * g, 1) + 0.01 * w;  w -= 0.1 * g'.
  Fixture<float> f("sgd(learning_rate=0.1, wd=0.01, rescale_grad=0.5, clip_gradient=1)",
                   {1.0f, -2.0f, 0.5f});
  const std::vector<float> g = {0.5f, 1.0f, -4.0f};
  CHECK_OK(f.Push(g));
  std::vector<float> w = f.Pull();
  // e0: g' = 0.25 + 0.01           = 0.26     -> w = 1 - 0.026          = 0.974
  // e1: g' = 0.5 - 0.02            = 0.48     -> w = -2 - 0.048         = -2.048
  // e2: g' = clip(-2, 1) + 0.005   = -0.995   -> w = 0.5 + 0.0995       = 0.5995
  //     (clipping after weight decay would give clip(-1.995) = -1 -> 0.6)
  CHECK_NEAR(w[0], 0.974, kF32);
  CHECK_NEAR(w[1], -2.048, kF32);
  CHECK_NEAR(w[2], 0.5995, kF32);
  CHECK_OK(f.Push(g));
  w = f.Pull();
  // e0: g' = 0.25 + 0.00974        = 0.25974  -> w = 0.974 - 0.025974   = 0.948026
  // e1: g' = 0.5 - 0.02048         = 0.47952  -> w = -2.048 - 0.047952  = -2.095952
  // e2: g' = -1 + 0.005995         = -0.994005 -> w = 0.5995 + 0.0994005 = 0.6989005
  CHECK_NEAR(w[0], 0.948026, kF32);
  CHECK_NEAR(w[1], -2.095952, kF32);
  CHECK_NEAR(w[2], 0.6989005, kF32);
}

void TestSgdMomentum() {
  // sgd(lr=0.1, momentum=0.9), float64. mom = 0.9 * mom - 0.1 * g; w += mom. (lr and
  // momentum act as their float32 roundings: see kF64Hyper.)
  Fixture<double> f("sgd(lr=0.1,momentum=0.9)", {1.0, 2.0});
  const std::vector<double> g = {1.0, -0.5};
  // step 1: mom = (-0.1, 0.05)                       w = (0.9, 2.05)
  // step 2: mom = (-0.09 - 0.1, 0.045 + 0.05)
  //             = (-0.19, 0.095)                     w = (0.71, 2.145)
  // step 3: mom = (-0.171 - 0.1, 0.0855 + 0.05)
  //             = (-0.271, 0.1355)                   w = (0.439, 2.2805)
  const double want[3][2] = {{0.9, 2.05}, {0.71, 2.145}, {0.439, 2.2805}};
  for (int step = 0; step < 3; ++step) {
    CHECK_OK(f.Push(g));
    std::vector<double> w = f.Pull();
    CHECK_NEAR(w[0], want[step][0], kF64Hyper);
    CHECK_NEAR(w[1], want[step][1], kF64Hyper);
  }
}

void TestSgdStatePerKey() {
  // Momentum state belongs to one key and is created on that key's first update.
  // sgd(lr=1, momentum=0.5), float32, keys 0 and 1 both start at 0, gradient 1 each time.
  // key 0 pushed twice: mom = -1, then -0.5 - 1 = -1.5  -> w = -1, then -2.5
  // key 1 pushed once afterwards: fresh state mom = -1  -> w = -1
  //   (with key 0's state it would be mom = -0.75 - 1 = -1.75 -> w = -1.75)
  Fixture<float> f("sgd(lr=1,momentum=0.5)", {0.0f}, 2);
  CHECK_OK(f.Push({1.0f}, 0));
  CHECK_OK(f.Push({1.0f}, 0));
  CHECK_OK(f.Push({1.0f}, 1));
  CHECK_NEAR(f.Pull(0)[0], -2.5, kF32);
  CHECK_NEAR(f.Pull(1)[0], -1.0, kF32);
  // key 1 again: mom = -0.5 - 1 = -1.5 -> w = -2.5 (its own history, not key 0's)
  CHECK_OK(f.Push({1.0f}, 1));
  CHECK_NEAR(f.Pull(1)[0], -2.5, kF32);
}

void TestSgdStringKeys() {
  // State is kept per string key. sgd(lr=1, momentum=0.5), float64, keys "a" and "b" at 0.
  Store s;
  CHECK_OK(KVStoreSetOptimizer(s.h, "sgd(lr=1,momentum=0.5)"));
  const char* ka = "a";
  const char* kb = "b";
  Array w(KV_FLOAT64, 1), g(KV_FLOAT64, 1), out(KV_FLOAT64, 1);
  w.Set(std::vector<double>{0.0});
  g.Set(std::vector<double>{1.0});
  CHECK_OK(KVStoreInitStr(s.h, 1, &ka, &w.h));
  CHECK_OK(KVStoreInitStr(s.h, 1, &kb, &w.h));
  CHECK_OK(KVStorePushStr(s.h, 1, &ka, &g.h, 0));  // a: mom -1,   w -1
  CHECK_OK(KVStorePushStr(s.h, 1, &ka, &g.h, 0));  // a: mom -1.5, w -2.5
  CHECK_OK(KVStorePushStr(s.h, 1, &kb, &g.h, 0));  // b: mom -1,   w -1
  CHECK_OK(KVStorePullStr(s.h, 1, &ka, &out.h, 0));
  CHECK_NEAR(out.Get<double>(1)[0], -2.5, kF64);
  CHECK_OK(KVStorePullStr(s.h, 1, &kb, &out.h, 0));
  CHECK_NEAR(out.Get<double>(1)[0], -1.0, kF64);
}

void TestClipZeroAndNegative() {
  // The reference's Python sgd, nag, adam and rmsprop pass clip_gradient to their operators
  // only when it is truthy, and the operators clip only when it is >= 0: 0 and negative
  // values both mean "no clipping". float64, lr 1 and wd 0.5 (exact in float32).
  // sgd: mom = 0 - (1 * 0.5) * 2 - 1 * 100 = -101 -> w = 2 - 101 = -99
  //      (clipping to 0, as kvstore did, gives mom = -1 -> w = 1)
  for (const char* spec : {"sgd(lr=1,wd=0.5,clip_gradient=0)", "sgd(lr=1,wd=0.5,clip_gradient=-1)",
                           "sgd(lr=1,wd=0.5)"}) {
    Fixture<double> f(spec, {2.0});
    CHECK_OK(f.Push({100.0}));
    CHECK_NEAR(f.Pull()[0], -99.0, kF64);
  }
  // nag without momentum (the reference's sgd_update): w = (1 - 0.5) * 2 - (1 * 1) * 100 = -99
  for (const char* spec : {"nag(lr=1,wd=0.5,clip_gradient=0)", "nag(lr=1,wd=0.5,clip_gradient=-3)"}) {
    Fixture<double> f(spec, {2.0});
    CHECK_OK(f.Push({100.0}));
    CHECK_NEAR(f.Pull()[0], -99.0, kF64);
  }
  // adam and rmsprop: clip_gradient=0 gives exactly the weights of no clip_gradient at all,
  // and a positive bound does clip (different weights).
  for (const char* base : {"adam(lr=0.5,wd=0.5", "rmsprop(lr=0.5,wd=0.5", "nag(lr=0.5,momentum=0.5",
                           "sgd(lr=0.5,momentum=0.5"}) {
    Fixture<double> off((std::string(base) + ")").c_str(), {2.0, -1.0});
    Fixture<double> zero((std::string(base) + ",clip_gradient=0)").c_str(), {2.0, -1.0});
    Fixture<double> on((std::string(base) + ",clip_gradient=0.25)").c_str(), {2.0, -1.0});
    for (int step = 0; step < 2; ++step) {
      CHECK_OK(off.Push({100.0, -3.0}));
      CHECK_OK(zero.Push({100.0, -3.0}));
      CHECK_OK(on.Push({100.0, -3.0}));
    }
    std::vector<double> a = off.Pull(), b = zero.Pull(), c = on.Pull();
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
    CHECK(a[0] != c[0] && a[1] != c[1]);
  }
  // adagrad's Python code clips whenever clip_gradient is given (`is not None`), so 0 clips
  // every gradient to 0: h stays 0, w = 2 + (0 / sqrt(0 + 1e-7) + 2 * 0.5) * -1 = 1.
  Fixture<double> ada("adagrad(lr=1,wd=0.5,clip_gradient=0)", {2.0});
  CHECK_OK(ada.Push({100.0}));
  CHECK_NEAR(ada.Pull()[0], 1.0, kF64);
  // A negative adagrad bound would make the reference map every gradient to -c or c: refused.
  Store s;
  CHECK_ERR(KVStoreSetOptimizer(s.h, "adagrad(clip_gradient=-1)"), KV_ERR_INVALID_ARGUMENT,
            "\"clip_gradient\" of optimizer adagrad must be >= 0");
}

// ---------------------------------------------------------------------------------------
// nag

void TestNag() {
  // nag(lr=0.1, momentum=0.9, wd=0.1), float32, w0 = (1, 2), g = (1, 0) every step.
  // g' = g + 0.1 w;  mom = 0.9 mom + g';  w -= 0.1 (g' + 0.9 mom)
  // step 1: e0 g' = 1.1          mom = 1.1        w = 1 - 0.1 (1.1 + 0.99)         = 0.791
  //         e1 g' = 0.2          mom = 0.2        w = 2 - 0.1 (0.2 + 0.18)         = 1.962
  // step 2: e0 g' = 1.0791       mom = 2.0691     w = 0.791 - 0.1 (1.0791 + 1.86219) = 0.496871
  //         e1 g' = 0.1962       mom = 0.3762     w = 1.962 - 0.1 (0.1962 + 0.33858) = 1.908522
  // step 3: e0 g' = 1.0496871    mom = 2.9118771
  //            w = 0.496871 - 0.1 (1.0496871 + 2.62068939)                      = 0.129833351
  //         e1 g' = 0.1908522    mom = 0.5294322
  //            w = 1.908522 - 0.1 (0.1908522 + 0.47648898)                      = 1.841787882
  // (plain momentum SGD would give 0.791 -> 0.5 ... e.g. step 2 e0 = 0.791 - 0.1*2.0691 = 0.58409)
  Fixture<float> f("nag(learning_rate=0.1,momentum=0.9,wd=0.1)", {1.0f, 2.0f});
  const double want[3][2] = {{0.791, 1.962}, {0.496871, 1.908522}, {0.129833351, 1.841787882}};
  for (int step = 0; step < 3; ++step) {
    CHECK_OK(f.Push({1.0f, 0.0f}));
    std::vector<float> w = f.Pull();
    CHECK_NEAR(w[0], want[step][0], kF32);
    CHECK_NEAR(w[1], want[step][1], kF32);
  }
}

void TestNagWithoutMomentum() {
  // nag with momentum 0 is plain SGD: w -= lr (g + wd w). float64.
  // w = 3 - 0.5 (1 + 0.1 * 3) = 2.35
  Fixture<double> f("nag(lr=0.5,wd=0.1)", {3.0});
  CHECK_OK(f.Push({1.0}));
  CHECK_NEAR(f.Pull()[0], 2.35, kF64Hyper);
}

// ---------------------------------------------------------------------------------------
// adam

void TestAdamBiasCorrection() {
  // adam(lr=0.1) with beta1 0.9, beta2 0.999, epsilon 1e-8 (defaults), float64, w0 = 1,
  // gradients 1, -1, 0.5. lr_t = 0.1 sqrt(1 - 0.999^t) / (1 - 0.9^t); w -= lr_t m / (sqrt v + eps)
  // t=1: m = 0.1, v = 0.001. lr_t = 0.1 * 0.0316227766 / 0.1 = 0.0316227766,
  //      m / sqrt v = 3.16227766 -> step 0.1 (less 3.2e-8 from eps)         w = 0.90000003162
  //      (without bias correction the step would be 0.1 * 3.162 = 0.316)
  // t=2: m = 0.09 - 0.1 = -0.01, v = 0.000999 + 0.001 = 0.001999,
  //      lr_t m / sqrt v = 0.1 * (-0.01 / 0.19) = -0.00526315789            w = 0.90526318834
  // t=3: m = -0.009 + 0.05 = 0.041, v = 0.001997001 + 0.00025 = 0.002247001,
  //      step = 0.1 * (0.041 / 0.271) * sqrt(0.002997001 / 0.002247001)
  //           = 0.0151291513 * 1.15489 = 0.0174725497                        w = 0.88779063861
  Fixture<double> f("adam(lr=0.1)", {1.0});
  const double grads[3] = {1.0, -1.0, 0.5};
  const double want[3] = {0.9000000316227666, 0.9052631883403315, 0.8877906386071536};
  // float32-rounded beta1 and beta2 (0.89999998, 0.99900001) move these by up to 8e-7.
  for (int t = 0; t < 3; ++t) {
    CHECK_OK(f.Push({grads[t]}));
    CHECK_NEAR(f.Pull()[0], want[t], 2e-6);
  }
}

void TestAdamClipAfterWeightDecay() {
  // adam(lr=0.1, wd=0.1, clip_gradient=0.5), float32, w0 = -8, g = 1 twice.
  // The reference clips rescale_grad * g + wd * w as a whole:
  // t=1: g' = clip(1 - 0.8, 0.5) = 0.2 > 0, m = 0.02, v = 0.00004 -> step +0.1     w = -8.1
  //      (clipping before weight decay: g' = 0.5 - 0.8 = -0.3 < 0 -> w = -7.9)
  // t=2: g' = clip(1 - 0.81) = 0.19, m = 0.018 + 0.019 = 0.037,
  //      v = 0.00003996 + 0.0000361 = 0.00007606,
  //      step = 0.1 (0.037 / 0.19) / sqrt(0.00007606 / 0.001999) = 0.01947368 / 0.19506159
  //           = 0.09983324                                                        w = -8.19983324
  Fixture<float> f("adam(lr=0.1,wd=0.1,clip_gradient=0.5)", {-8.0f});
  CHECK_OK(f.Push({1.0f}));
  CHECK_NEAR(f.Pull()[0], -8.1, kF32);
  CHECK_OK(f.Push({1.0f}));
  CHECK_NEAR(f.Pull()[0], -8.19983324, kF32);
}

void TestAdamStepCountPerKey() {
  // t counts the updates of each key separately. adam(lr=0.1), float64, both keys at 1.
  // Key 0 takes gradients 1, -1 (t = 1, 2); key 1 then takes 1, -1 and must repeat key 0's
  // values 0.90000003162 and 0.90526318834 (above). With one counter for all keys, key 1's
  // first update would run at t = 3: lr_t = 0.1 sqrt(0.002997001) / 0.271 = 0.0202011,
  // step = 0.0202011 * 0.1 / sqrt(0.001) = 0.0638814 -> w = 0.9361186.
  Fixture<double> f("adam(lr=0.1)", {1.0}, 2);
  CHECK_OK(f.Push({1.0}, 0));
  CHECK_OK(f.Push({-1.0}, 0));
  CHECK_OK(f.Push({1.0}, 1));
  CHECK_NEAR(f.Pull(1)[0], 0.9000000316227666, 2e-6);
  CHECK_OK(f.Push({-1.0}, 1));
  CHECK_NEAR(f.Pull(1)[0], 0.9052631883403315, 2e-6);
  CHECK(f.Pull(1) == f.Pull(0));
}

// ---------------------------------------------------------------------------------------
// adagrad

void TestAdaGrad() {
  // adagrad(lr=0.1, eps=0.21, wd=0.1, rescale_grad=0.5, clip_gradient=2), float64,
  // w0 = (1, 0), g = (2, 8) twice.
  // g' = clip(0.5 g, 2); h += g'^2; w -= 0.1 (g'/sqrt(h+eps) + 0.1 w)
  // step 1: e0 g' = 1, h = 1, sqrt(1.21) = 1.1:  w = 1 - 0.1 (0.9090909091 + 0.1)  = 0.8990909091
  //            (eps outside the root: 1/(1+0.21) = 0.826 -> 0.9073553719)
  //         e1 g' = clip(4) = 2, h = 4, sqrt(4.21) = 2.0518284529:
  //            w = 0 - 0.1 (0.9747403577 + 0)                                  = -0.0974740358
  // step 2: e0 h = 2, sqrt(2.21) = 1.4866068747:
  //            w = 0.8990909091 - 0.1 (0.6726727939 + 0.0899090909)           = 0.8228327206
  //         e1 h = 8, sqrt(8.21) = 2.8653097563:
  //            w = -0.0974740358 - 0.1 (0.6980049 - 0.0097474036)             = -0.1662997767
  Fixture<double> f("adagrad(lr=0.1,eps=0.21,wd=0.1,rescale_grad=0.5,clip_gradient=2)",
                    {1.0, 0.0});
  CHECK_OK(f.Push({2.0, 8.0}));
  std::vector<double> w = f.Pull();
  CHECK_NEAR(w[0], 0.8990909091, 1e-9);
  CHECK_NEAR(w[1], -0.0974740358, 1e-9);
  CHECK_OK(f.Push({2.0, 8.0}));
  w = f.Pull();
  CHECK_NEAR(w[0], 0.8228327206, 1e-9);
  CHECK_NEAR(w[1], -0.1662997767, 1e-9);
}

// ---------------------------------------------------------------------------------------
// rmsprop

void TestRmsProp() {
  // rmsprop(lr=0.01, epsilon=0.15), gamma1 0.9 (default), float32, w0 = 1, g = 1 twice.
  // n = 0.1 g'^2 + 0.9 n;  w -= 0.01 g' / sqrt(n + eps)
  // step 1: n = 0.1,  sqrt(0.25) = 0.5           w = 1 - 0.01 / 0.5            = 0.98
  //         (eps outside the root: 0.01 / (0.3162 + 0.15) = 0.02145 -> 0.97855)
  // step 2: n = 0.19, sqrt(0.34) = 0.5830951895  w = 0.98 - 0.0171498585     = 0.9628501415
  Fixture<float> f("rmsprop(lr=0.01,epsilon=0.15)", {1.0f});
  CHECK_OK(f.Push({1.0f}));
  CHECK_NEAR(f.Pull()[0], 0.98, kF32);
  CHECK_OK(f.Push({1.0f}));
  CHECK_NEAR(f.Pull()[0], 0.9628501415, kF32);
}

void TestRmsPropClipping() {
  // rmsprop(lr=0.1, rho=0.5, epsilon=0.15, wd=0.2, clip_gradient=0.5, clip_weights=1.5),
  // float64, w0 = (-1, 2), g = (0.6, 0). g' = clip(g + 0.2 w, 0.5)
  // e0: g' = clip(0.6 - 0.2) = 0.4 (clip first: 0.5 - 0.2 = 0.3), n = 0.5 * 0.16 = 0.08,
  //     sqrt(0.23) = 0.4795831523   w = -1 - 0.04 / 0.4795831523 = -1.0834057656
  // e1: g' = clip(0 + 0.4) = 0.4, n = 0.08  w = 2 - 0.0834057656 = 1.9165942344 -> clip 1.5
  Fixture<double> f(
      "rmsprop(lr=0.1,rho=0.5,epsilon=0.15,wd=0.2,clip_gradient=0.5,clip_weights=1.5)",
      {-1.0, 2.0});
  CHECK_OK(f.Push({0.6, 0.0}));
  std::vector<double> w = f.Pull();
  CHECK_NEAR(w[0], -1.0834057656, kF64Hyper);
  CHECK_NEAR(w[1], 1.5, kF64);
  // clip_weights <= 0 is off (the Python RMSProp passes it only when truthy, the operator
  // clips only when it is >= 0): e1 ends at 1.9165942344 either way, not at 0.
  for (const char* spec : {"rmsprop(lr=0.1,rho=0.5,epsilon=0.15,wd=0.2,clip_weights=0)",
                           "rmsprop(lr=0.1,rho=0.5,epsilon=0.15,wd=0.2,clip_weights=-2)"}) {
    Fixture<double> g(spec, {-1.0, 2.0});
    CHECK_OK(g.Push({0.6, 0.0}));
    CHECK_NEAR(g.Pull()[1], 1.9165942344, kF64Hyper);
  }
}

void TestRmsPropCentered() {
  // rmsprop(centered=1): the reference's rmspropalex_update (Graves). lr 0.5, gamma1 0.5,
  // gamma2 0.5, epsilon 0.25 (all exact in float32), float64, w0 = 1, g = 1 twice.
  // n = 0.5 g^2 + 0.5 n;  m = 0.5 g + 0.5 m;  d = 0.5 d - 0.5 g / sqrt(n - m^2 + 0.25);  w += d
  // step 1: n = 0.5, m = 0.5, sqrt(0.5 - 0.25 + 0.25) = 0.7071067812
  //         d = -0.5 / 0.7071067812 = -0.7071067812           w = 0.2928932188
  //         (non-centred: sqrt(0.5 + 0.25) = 0.8660254038, w = 1 - 0.5773502692 = 0.4226497308)
  // step 2: n = 0.75, m = 0.75, sqrt(0.75 - 0.5625 + 0.25) = sqrt(0.4375) = 0.6614378278
  //         d = -0.3535533906 - 0.7559289460 = -1.1094823366   w = -0.8165891178
  Fixture<double> f("rmsprop(lr=0.5,gamma1=0.5,gamma2=0.5,epsilon=0.25,centered=1)", {1.0});
  CHECK_OK(f.Push({1.0}));
  CHECK_NEAR(f.Pull()[0], 0.2928932188, 1e-9);
  CHECK_OK(f.Push({1.0}));
  CHECK_NEAR(f.Pull()[0], -0.8165891178, 1e-9);
  Store s;
  CHECK_ERR(KVStoreSetOptimizer(s.h, "rmsprop(centered=0.5)"), KV_ERR_INVALID_ARGUMENT,
            "\"centered\" of optimizer rmsprop must be 0 or 1");
}

// ---------------------------------------------------------------------------------------
// Bit-exact agreement with the reference. RefStep below is written from MXNet 1.9.1's
// kernels (src/operator/optimizer_op-inl.h) and Python optimizers, performing their
// operations in their order in T (float for float32 weights, double for float64); each
// case runs a few steps over many elements, with and without clipping, and requires every
// bit of the store's weights to match. (Built with -ffp-contract=off: no fused multiply-add
// may merge two of the reference's roundings.)

enum class RefKind { kSgd, kNag, kAdam, kAdaGrad, kRmsProp, kRmsPropCentered };

struct RefSpec {
  RefKind kind;
  double lr, wd, rescale, clip;  // clip < 0: not given
  double momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, gamma1 = 0.9, gamma2 = 0.9,
         clip_weights = -1;  // clip_weights < 0: not given
  bool multi_precision = false;  // given as multi_precision=1

  std::string Text() const {
    const char* names[] = {"sgd", "nag", "adam", "adagrad", "rmsprop", "rmsprop"};
    std::string out = std::string(names[static_cast<int>(kind)]) + "(";
    auto add = [&out](const char* name, double v) {
      char b[64];
      std::snprintf(b, sizeof b, "%s%s=%.17g", out.back() == '(' ? "" : ",", name, v);
      out += b;
    };
    add("lr", lr);
    add("wd", wd);
    add("rescale_grad", rescale);
    if (clip >= 0) add("clip_gradient", clip);
    switch (kind) {
      case RefKind::kSgd:
      case RefKind::kNag: add("momentum", momentum); break;
      case RefKind::kAdam: add("beta1", beta1); add("beta2", beta2); add("epsilon", eps); break;
      case RefKind::kAdaGrad: add("eps", eps); break;
      case RefKind::kRmsPropCentered: add("centered", 1); add("gamma2", gamma2); [[fallthrough]];
      case RefKind::kRmsProp:
        add("gamma1", gamma1);
        add("epsilon", eps);
        if (clip_weights >= 0) add("clip_weights", clip_weights);
        break;
    }
    if (multi_precision) add("multi_precision", 1);
    return out + ")";
  }
};

// mshadow_op::clip::Map, literally.
template <typename T> T RefClip(T x, T bound) {
  return x > bound ? bound : (x < -bound ? -bound : x);
}

// One reference step `t` (1-based) on every element. `st` holds up to three state arrays.
template <typename T>
void RefStep(const RefSpec& r, int t, std::vector<T>& w, const std::vector<T>& g,
             std::vector<T> st[3]) {
  // The fused operators' float32 parameter fields; adagrad's NDArray scalars are doubles,
  // its nd.clip bounds float32.
  auto f32 = [](double v) { return static_cast<T>(static_cast<float>(v)); };
  const bool fused = r.kind != RefKind::kAdaGrad;
  auto par = [&](double v) { return fused ? f32(v) : static_cast<T>(v); };
  const T lr = par(r.lr), wd = par(r.wd), rs = par(r.rescale);
  // Python: the fused optimizers pass clip_gradient when truthy; AdaGrad when not None.
  const bool clip_on = r.kind == RefKind::kAdaGrad ? r.clip >= 0 : r.clip > 0;
  const T c = f32(r.clip);
  for (size_t i = 0; i < w.size(); ++i) {
    const T wi = w[i], gi = g[i];
    switch (r.kind) {
      case RefKind::kSgd: {  // multi_sgd_update / multi_sgd_mom_update
        const bool mom_on = r.momentum > 0;
        const T mu = mom_on ? par(r.momentum) : T(0);
        const T m0 = mom_on ? st[0][i] : T(0);
        T mom;
        if (clip_on) mom = mu * m0 - lr * wd * wi - lr * RefClip(rs * gi, c);
        else mom = mu * m0 - lr * wd * wi - lr * rs * gi;
        if (mom_on) st[0][i] = mom;
        w[i] = wi + mom;
        break;
      }
      case RefKind::kNag:
        if (r.momentum > 0) {  // nag_mom_update
          const T mu = par(r.momentum);
          const T gr = clip_on ? RefClip(rs * gi, c) : rs * gi;
          st[0][i] = mu * st[0][i];
          w[i] = wi - st[0][i] + (mu + 1) * (st[0][i] - (lr * (gr + (wd * wi))));
          st[0][i] = st[0][i] - (lr * (gr + (wd * wi)));
        } else if (clip_on) {  // sgd_update
          w[i] = (1.f - lr * wd) * wi - (lr) * RefClip(rs * gi, c);
        } else {
          w[i] = (1.f - lr * wd) * wi - (lr * rs) * gi;
        }
        break;
      case RefKind::kAdam: {  // Python Adam's lr_t, then adam_update
        const double coef1 = 1. - std::pow(r.beta1, t), coef2 = 1. - std::pow(r.beta2, t);
        const T lr_t = f32(r.lr * (std::sqrt(coef2) / coef1));
        const T b1 = par(r.beta1), b2 = par(r.beta2), e = par(r.eps);
        T gr = gi * rs + wi * wd;
        if (clip_on) gr = RefClip(gr, c);
        st[0][i] = b1 * st[0][i] + (1.f - b1) * gr;
        st[1][i] = b2 * st[1][i] + (1.f - b2) * gr * gr;
        w[i] = wi - lr_t * st[0][i] / (std::sqrt(st[1][i]) + e);
        break;
      }
      case RefKind::kAdaGrad: {  // Python AdaGrad, dense NDArray arithmetic
        T gr = gi * rs;
        if (clip_on) gr = gr > c ? c : (gr < -c ? -c : gr);  // nd.clip(grad, -c, c)
        st[0][i] += gr * gr;
        const T div = gr / std::sqrt(st[0][i] + static_cast<T>(r.eps));
        w[i] = wi + (div + wi * wd) * static_cast<T>(-r.lr);
        break;
      }
      case RefKind::kRmsProp: {  // rmsprop_update
        const T g1 = par(r.gamma1), e = par(r.eps);
        T gr = rs * gi + wd * wi;
        if (clip_on) gr = RefClip(gr, c);
        st[0][i] = (1.f - g1) * (gr * gr) + g1 * st[0][i];
        T nw = wi - lr * (gr / std::sqrt(st[0][i] + e));
        if (r.clip_weights > 0) nw = RefClip(nw, f32(r.clip_weights));
        w[i] = nw;
        break;
      }
      case RefKind::kRmsPropCentered: {  // rmspropalex_update
        const T g1 = par(r.gamma1), g2 = par(r.gamma2), e = par(r.eps);
        T gr = rs * gi + wd * wi;
        if (clip_on) gr = RefClip(gr, c);
        st[0][i] = (1.f - g1) * gr * gr + g1 * st[0][i];
        st[1][i] = (1.f - g1) * gr + g1 * st[1][i];
        st[2][i] = g2 * st[2][i] - (lr * (gr) / (std::sqrt(st[0][i] - st[1][i] * st[1][i] + e)));
        T nw = wi + st[2][i];
        if (r.clip_weights > 0) nw = RefClip(nw, f32(r.clip_weights));
        w[i] = nw;
        break;
      }
    }
  }
}

// Runs `r` for 3 steps on 1031 elements (an odd count: vector loops and their remainders)
// in T through a local store and through RefStep, and compares every bit.
template <typename T>
void CheckMatchesReference(const RefSpec& r) {
  const size_t n = 1031;
  std::vector<T> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = static_cast<T>(2.0 * std::sin(0.37 * static_cast<double>(i)));
  std::vector<T> ref = w;
  std::vector<T> st[3] = {std::vector<T>(n), std::vector<T>(n), std::vector<T>(n)};
  const std::string spec = r.Text();
  Fixture<T> f(spec.c_str(), w);
  for (int t = 1; t <= 3; ++t) {
    std::vector<T> g(n);
    for (size_t i = 0; i < n; ++i) {  // magnitudes from 1e-3 to 30, so clipping bites
      const double x = static_cast<double>(i) * 0.91 + 1.7 * t;
      g[i] = static_cast<T>(std::cos(x) * std::pow(10.0, std::fmod(x, 4.5) - 3.0));
    }
    CHECK_OK(f.Push(g));
    RefStep<T>(r, t, ref, g, st);
  }
  const std::vector<T> got = f.Pull();
  size_t differ = 0, first = n;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i], &ref[i], sizeof(T)) != 0 && differ++ == 0) first = i;
  }
  // (The message is formatted whether or not the check fails: `first` is n when none differ.)
  const size_t shown = differ == 0 ? 0 : first;
  CHECK_MSG(differ == 0,
            "%s %s: %zu of %zu elements differ from the reference; first at %zu: got %.17g "
            "want %.17g", sizeof(T) == 4 ? "float32" : "float64", spec.c_str(), differ, n, first,
            static_cast<double>(got[shown]), static_cast<double>(ref[shown]));
  CHECK(got != w);  // the steps did move the weights
}

void CheckBothTypes(const RefSpec& r) {
  CheckMatchesReference<float>(r);
  CheckMatchesReference<double>(r);
}

// multi_precision changes nothing for float32 and float64 weights: the same bits.
void TestMultiPrecisionWideUnaffected() {
  for (RefKind kind : {RefKind::kSgd, RefKind::kNag, RefKind::kAdam, RefKind::kAdaGrad,
                       RefKind::kRmsProp, RefKind::kRmsPropCentered}) {
    RefSpec r{kind, 0.01, 0.01, 0.3, 0.75};
    r.momentum = 0.9;
    r.eps = 1e-3;
    r.multi_precision = true;
    CheckBothTypes(r);
  }
}

void TestMatchesReferenceSgd() {
  for (double clip : {-1.0, 0.0, 0.75}) {
    for (double momentum : {0.0, 0.9}) {
      RefSpec r{RefKind::kSgd, 0.1, 0.01, 0.3, clip};
      r.momentum = momentum;
      CheckBothTypes(r);
    }
  }
}

void TestMatchesReferenceNag() {
  for (double clip : {-1.0, 0.0, 0.75}) {
    for (double momentum : {0.0, 0.9}) {
      RefSpec r{RefKind::kNag, 0.1, 0.01, 0.3, clip};
      r.momentum = momentum;
      CheckBothTypes(r);
    }
  }
}

void TestMatchesReferenceAdam() {
  for (double clip : {-1.0, 0.0, 0.75}) {
    RefSpec r{RefKind::kAdam, 0.01, 0.01, 0.3, clip};
    r.eps = 1e-3;  // large enough to matter in every element
    CheckBothTypes(r);
  }
}

void TestMatchesReferenceAdaGrad() {
  for (double clip : {-1.0, 0.0, 0.75}) {
    RefSpec r{RefKind::kAdaGrad, 0.1, 0.01, 0.3, clip};
    r.eps = 1e-3;
    CheckBothTypes(r);
  }
}

void TestMatchesReferenceRmsProp() {
  for (RefKind kind : {RefKind::kRmsProp, RefKind::kRmsPropCentered}) {
    for (double clip : {-1.0, 0.0, 0.75}) {
      for (double clip_weights : {-1.0, 0.0, 1.5}) {
        RefSpec r{kind, 0.01, 0.01, 0.3, clip};
        r.eps = 1e-3;
        r.clip_weights = clip_weights;
        CheckBothTypes(r);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// A failed push moves no optimizer state: values and state are committed together.

// For each stateful optimizer on `store_type`: store A pushes key 0, then a call with keys
// {0, 1} that fails because key 1 is int32 (only `test` updates integers), then key 0 twice
// more; store B does the same without the failed call. Key 0 must be unchanged by the
// failed call and end bit-identical in A and B (with the state advanced by the failed call,
// sgd's next step would use momentum 0.81 instead of 0.9 of the first gradient).
void CheckFailedPushKeepsState(const char* store_type, bool pushpull) {
  const char* specs[] = {"sgd(lr=0.1,momentum=0.9)", "nag(lr=0.1,momentum=0.9)", "adam(lr=0.1)",
                         "adagrad(lr=0.1)", "rmsprop(lr=0.1)", "rmsprop(lr=0.1,centered=1)"};
  for (const char* spec : specs) {
    Store a(store_type), b(store_type);
    Array w0(KV_FLOAT32, 3), g(KV_FLOAT32, 3), wi(KV_INT32, 3), gi(KV_INT32, 3);
    Array out(KV_FLOAT32, 3), outi(KV_INT32, 3);
    w0.Set(std::vector<float>{1.0f, -2.0f, 0.5f});
    g.Set(std::vector<float>{1.0f, 0.5f, -0.25f});
    wi.Set(std::vector<int32_t>{1, 2, 3});
    gi.Set(std::vector<int32_t>{1, 1, 1});
    int k0 = 0, k1 = 1;
    for (Store* s : {&a, &b}) {
      CHECK_OK(KVStoreSetOptimizer(s->h, spec));
      CHECK_OK(KVStoreInit(s->h, 1, &k0, &w0.h));
      CHECK_OK(KVStoreInit(s->h, 1, &k1, &wi.h));
      CHECK_OK(KVStorePush(s->h, 1, &k0, &g.h, 0));
    }
    CHECK_OK(KVStorePull(a.h, 1, &k0, &out.h, 0));
    const std::vector<float> before = out.Get<float>(3);
    const int keys[2] = {0, 1};
    const KVArrayHandle vals[2] = {g.h, gi.h};
    const KVArrayHandle outs[2] = {out.h, outi.h};
    if (pushpull) {
      CHECK_ERR(KVStorePushPull(a.h, 2, keys, vals, 2, keys, outs, 0), KV_ERR_NOT_SUPPORTED,
                "int32");
    } else {
      CHECK_ERR(KVStorePush(a.h, 2, keys, vals, 0), KV_ERR_NOT_SUPPORTED, "int32");
    }
    CHECK_OK(KVStorePull(a.h, 1, &k0, &out.h, 0));
    CHECK(out.Get<float>(3) == before);
    for (int step = 0; step < 2; ++step) {
      CHECK_OK(KVStorePush(a.h, 1, &k0, &g.h, 0));
      CHECK_OK(KVStorePush(b.h, 1, &k0, &g.h, 0));
    }
    CHECK_OK(KVStorePull(a.h, 1, &k0, &out.h, 0));
    const std::vector<float> got = out.Get<float>(3);
    CHECK_OK(KVStorePull(b.h, 1, &k0, &out.h, 0));
    const std::vector<float> want = out.Get<float>(3);
    CHECK_MSG(std::memcmp(got.data(), want.data(), 3 * sizeof(float)) == 0,
              "%s%s%s: the failed call changed the optimizer state (got %f, want %f)",
              store_type, pushpull ? " pushpull " : " push ", spec, got[0], want[0]);
  }
}

void TestFailedPushKeepsState() {
  CheckFailedPushKeepsState("local", false);
  CheckFailedPushKeepsState("local", true);
  CheckFailedPushKeepsState("device", false);
}

void TestFailedPushKeepsStateStringKeys() {
  // The same with string keys: sgd(lr=1, momentum=0.5); "w" float32 at 1, "n" int32.
  Store a, b;
  Array w0(KV_FLOAT32, 1), g(KV_FLOAT32, 1), wi(KV_INT32, 1), out(KV_FLOAT32, 1);
  w0.Set(std::vector<float>{1.0f});
  g.Set(std::vector<float>{1.0f});
  wi.Set(std::vector<int32_t>{7});
  const char* kw = "w";
  const char* kn = "n";
  for (Store* s : {&a, &b}) {
    CHECK_OK(KVStoreSetOptimizer(s->h, "sgd(lr=1,momentum=0.5)"));
    CHECK_OK(KVStoreInitStr(s->h, 1, &kw, &w0.h));
    CHECK_OK(KVStoreInitStr(s->h, 1, &kn, &wi.h));
    CHECK_OK(KVStorePushStr(s->h, 1, &kw, &g.h, 0));  // mom = -1, w = 0
  }
  const char* keys[2] = {"w", "n"};
  const KVArrayHandle vals[2] = {g.h, wi.h};
  CHECK_ERR(KVStorePushStr(a.h, 2, keys, vals, 0), KV_ERR_NOT_SUPPORTED, "\"n\"");
  // mom = 0.5 * -1 - 1 = -1.5, w = -1.5 (had the failed call moved mom to -1.5: -1.75 -> -1.75)
  CHECK_OK(KVStorePushStr(a.h, 1, &kw, &g.h, 0));
  CHECK_OK(KVStorePushStr(b.h, 1, &kw, &g.h, 0));
  CHECK_OK(KVStorePullStr(a.h, 1, &kw, &out.h, 0));
  CHECK(out.Get<float>(1)[0] == -1.5f);
  CHECK_OK(KVStorePullStr(b.h, 1, &kw, &out.h, 0));
  CHECK(out.Get<float>(1)[0] == -1.5f);
}

// ---------------------------------------------------------------------------------------
// test optimizer, dtypes

void TestTestOptimizer() {
  // test(rescale_grad=0.25): w += 0.25 g, exact. float32: (1, 2) + 0.25 (0.5, -4) = (1.125, 1)
  Fixture<float> f("test(rescale_grad=0.25)", {1.0f, 2.0f});
  CHECK_OK(f.Push({0.5f, -4.0f}));
  std::vector<float> w = f.Pull();
  CHECK(w[0] == 1.125f && w[1] == 1.0f);
  // int32 with the default rescale_grad 1: exact integer sums.
  Fixture<int32_t> i("test", {2147483000, -5});
  CHECK_OK(i.Push({600, 7}));
  std::vector<int32_t> wi = i.Pull();
  CHECK(wi[0] == 2147483600 && wi[1] == 2);
  Fixture<int64_t> l("test", {int64_t{1} << 60, 3});
  CHECK_OK(l.Push({5, -4}));
  std::vector<int64_t> wl = l.Pull();
  CHECK(wl[0] == (int64_t{1} << 60) + 5 && wl[1] == -1);
}

void TestIntegerRejected() {
  // Integer weights: only test with rescale_grad=1; anything else fails and leaves w as it was.
  Fixture<int32_t> sgd("sgd(lr=1)", {10, 20});
  CHECK_ERR(sgd.Push({1, 2}), KV_ERR_NOT_SUPPORTED, "int32");
  std::vector<int32_t> w = sgd.Pull();
  CHECK(w[0] == 10 && w[1] == 20);
  Fixture<uint8_t> half("test(rescale_grad=0.5)", {10, 20});
  CHECK_ERR(half.Push({1, 2}), KV_ERR_NOT_SUPPORTED, "rescale_grad");
  std::vector<uint8_t> u = half.Pull();
  CHECK(u[0] == 10 && u[1] == 20);
}

void TestFloat16() {
  // sgd(lr=0.5, momentum=0.5) on float16 weights (bit patterns), computed in float; every
  // value below is exact in binary16.
  // w0 = (1.0 = 0x3C00, -2.0 = 0xC000), g = (0.5 = 0x3800, 0.25 = 0x3400)
  // step 1: mom = (-0.25, -0.125)        w = (0.75 = 0x3A00, -2.125 = 0xC040)
  // step 2: mom = (-0.125 - 0.25, -0.0625 - 0.125) = (-0.375, -0.1875)
  //                                      w = (0.375 = 0x3600, -2.3125 = 0xC0A0)
  Fixture<uint16_t> f("sgd(lr=0.5,momentum=0.5)", {0x3C00, 0xC000});
  CHECK_OK(f.Push({0x3800, 0x3400}));
  std::vector<uint16_t> w = f.Pull();
  CHECK(w[0] == 0x3A00 && w[1] == 0xC040);
  CHECK_OK(f.Push({0x3800, 0x3400}));
  w = f.Pull();
  CHECK(w[0] == 0x3600 && w[1] == 0xC0A0);
}

void TestFloat16StateIsFloat() {
  // The state of float16 weights is kept in float32: adagrad(lr=0.5) with w0 = 1 (0x3C00) and
  // g = 256 (0x5C00) makes the history 256^2 = 65536, above binary16's largest finite value
  // 65504, so a float16 state would overflow to inf and freeze the weight.
  // step 1: h = 65536,  w = 1 - 0.5 * 256 / sqrt(65536 + 1e-7)   = 0.5           = 0x3800
  //         (float16 state: h = inf -> 256 / inf = 0 -> w stays 1 = 0x3C00)
  // step 2: h = 131072, w = 0.5 - 0.5 * 256 / 362.0386719 = 0.5 - 0.3535534 = 0.1464466,
  //         nearest binary16 (spacing 2^-13 in [0.125, 0.25)): 1200 * 2^-13 = 0.146484375
  //         = 0x30B0
  Fixture<uint16_t> f("adagrad(lr=0.5)", {0x3C00});
  CHECK_OK(f.Push({0x5C00}));
  CHECK(f.Pull()[0] == 0x3800);
  CHECK_OK(f.Push({0x5C00}));
  CHECK(f.Pull()[0] == 0x30B0);
}

// ---------------------------------------------------------------------------------------
// multi_precision: float16 weights with a float32 master copy

// binary16 <-> float32, written from the IEEE 754 definitions (independent of the library):
// RefHalf rounds to nearest, ties to even; overflow gives infinity.
float RefFloat(uint16_t h) {
  const int exp = (h >> 10) & 31, mant = h & 1023;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(1024 + mant), exp - 25);
  return (h & 0x8000) ? -v : v;
}

uint16_t RefHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00;     // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00;    // >= 65520: rounds to infinity
  if (ax < 0x38800000u) {                         // below 2^-14: a multiple of 2^-24
    const double units = std::fabs(static_cast<double>(f)) * 16777216.0;  // exact
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(units)));
  }
  uint32_t h = ((((ax >> 23) - 127 + 15) << 10) | ((ax & 0x7fffffu) >> 13));
  const uint32_t rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;  // a carry moves to the exponent
  return static_cast<uint16_t>(sign | h);
}

// Pushes the float16 values `gs` to key 0 of `store` in one call (keys {0, 0, ...}).
void PushHalves(KVStoreHandle store, const std::vector<std::vector<uint16_t>>& gs) {
  std::vector<std::unique_ptr<Array>> arrays;
  std::vector<KVArrayHandle> handles;
  std::vector<int> keys(gs.size(), 0);
  for (const auto& g : gs) {
    arrays.push_back(std::make_unique<Array>(KV_FLOAT16, g.size()));
    arrays.back()->Set(g);
    handles.push_back(arrays.back()->h);
  }
  CHECK_OK(KVStorePush(store, static_cast<int>(gs.size()), keys.data(), handles.data(), 0));
}

std::vector<uint16_t> PullHalves(KVStoreHandle store, size_t n) {
  Array out(KV_FLOAT16, n);
  int key = 0;
  CHECK_OK(KVStorePull(store, 1, &key, &out.h, 0));
  return out.Get<uint16_t>(n);
}

// `r` with multi_precision=1 on float16 weights, through a `store_type` store: each of 4
// steps pushes 3 float16 gradients for the key in one call. The expected weights are the
// float32 reference (RefStep<float>) run on a float32 master copy of the initial weights
// with the float32 sum of the 3 gradients (each converted, summed left to right), rounded
// to float16 after every step; every bit is compared. The same pushes without
// multi_precision must end elsewhere (the lost sub-ulp updates and the float16-rounded sums).
void CheckMultiPrecision(RefSpec r, const char* store_type, size_t n = 517) {
  std::vector<uint16_t> w16(n);
  for (size_t i = 0; i < n; ++i) {
    w16[i] = RefHalf(static_cast<float>(2.0 * std::sin(0.37 * static_cast<double>(i))));
  }
  std::vector<float> master(n);
  for (size_t i = 0; i < n; ++i) master[i] = RefFloat(w16[i]);
  std::vector<float> st[3] = {std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  r.multi_precision = true;
  const std::string spec = r.Text();
  r.multi_precision = false;
  const std::string plain_spec = r.Text();
  Store mp(store_type), plain(store_type);
  CHECK_OK(KVStoreSetOptimizer(mp.h, spec.c_str()));
  CHECK_OK(KVStoreSetOptimizer(plain.h, plain_spec.c_str()));
  {
    Array a(KV_FLOAT16, n);
    a.Set(w16);
    int key = 0;
    CHECK_OK(KVStoreInit(mp.h, 1, &key, &a.h));
    CHECK_OK(KVStoreInit(plain.h, 1, &key, &a.h));
  }
  for (int t = 1; t <= 4; ++t) {
    std::vector<std::vector<uint16_t>> gs(3, std::vector<uint16_t>(n));
    std::vector<float> sum(n);
    for (size_t j = 0; j < gs.size(); ++j) {
      for (size_t i = 0; i < n; ++i) {  // magnitudes from 1e-4 to 3: clipping bites
        const double x = static_cast<double>(i) * 0.91 + 1.7 * t + 0.5 * static_cast<double>(j);
        gs[j][i] = RefHalf(static_cast<float>(std::cos(x) * std::pow(10.0, std::fmod(x, 4.5) - 4.0)));
        sum[i] = j == 0 ? RefFloat(gs[j][i]) : sum[i] + RefFloat(gs[j][i]);
      }
    }
    PushHalves(mp.h, gs);
    PushHalves(plain.h, gs);
    RefStep<float>(r, t, master, sum, st);
    const std::vector<uint16_t> got = PullHalves(mp.h, n);
    size_t differ = 0, first = n;
    for (size_t i = 0; i < n; ++i) {
      if (got[i] != RefHalf(master[i]) && differ++ == 0) first = i;
    }
    const size_t shown = differ == 0 ? 0 : first;
    CHECK_MSG(differ == 0,
              "%s %s step %d: %zu of %zu float16 weights differ from the float32 master rounded; "
              "first at %zu: got 0x%04x want 0x%04x (master %.9g)", store_type, spec.c_str(), t,
              differ, n, first, got[shown], RefHalf(master[shown]),
              static_cast<double>(master[shown]));
  }
  const std::vector<uint16_t> got = PullHalves(mp.h, n);
  const std::vector<uint16_t> without = PullHalves(plain.h, n);
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) differ += got[i] != without[i];
  CHECK_MSG(differ > 0, "%s %s: multi_precision changed no weight", store_type, spec.c_str());
  CHECK(got != w16);  // the steps did move the weights
}

void TestMultiPrecisionMatchesFloat32() {
  for (const char* store_type : {"local", "device"}) {
    for (RefKind kind : {RefKind::kSgd, RefKind::kNag, RefKind::kAdam, RefKind::kAdaGrad,
                         RefKind::kRmsProp, RefKind::kRmsPropCentered}) {
      for (double clip : {-1.0, 0.75}) {
        RefSpec r{kind, 0.01, 0.01, 0.3, clip};
        r.eps = 1e-3;
        CheckMultiPrecision(r, store_type);
        if (kind == RefKind::kSgd || kind == RefKind::kNag) {
          r.momentum = 0.9;
          CheckMultiPrecision(r, store_type);
        }
      }
    }
  }
}

void TestMultiPrecisionLargeArray() {
  // 2^19 + 7 elements: the float32 sum and the update both take the worker pool's parallel
  // path (ctest sets KVSTORE_CPU_THREADS=4; both pass 4 MiB of traffic), and the bits must
  // still be those of the serial reference.
  RefSpec sgd{RefKind::kSgd, 0.01, 0.01, 0.3, 0.75};
  sgd.momentum = 0.9;
  CheckMultiPrecision(sgd, "local", (size_t{1} << 19) + 7);
  RefSpec adam{RefKind::kAdam, 0.01, 0.01, 0.3, -1};
  adam.eps = 1e-3;
  CheckMultiPrecision(adam, "local", (size_t{1} << 19) + 7);
}

void TestMultiPrecisionSumsInFloat32() {
  // test(multi_precision=1), float16 w0 = 0; each call pushes 1024, 0.25 and 0.25 for the key.
  // Summed in float32: 1024.5 per call; the master goes 1024.5, 2049, 3073.5 and the stored
  // value is its float16 rounding (spacing 1 in [1024, 2048), 2 in [2048, 4096)):
  //   1024.5 -> 1024 (tie, even) = 0x6400; 2049 -> 2048 (tie, even) = 0x6800;
  //   3073.5 -> 3074 = 0x6A01.
  // A float16-rounded sum (1024.5 -> 1024) would give 1024, 2048, 3072 = 0x6A00 with or
  // without a master copy, and so does the same store without multi_precision.
  const std::vector<std::vector<uint16_t>> gs = {{0x6400}, {0x3400}, {0x3400}};
  const uint16_t want[3] = {0x6400, 0x6800, 0x6A01};
  for (const char* store_type : {"local", "device"}) {
    Store mp(store_type), plain(store_type);
    CHECK_OK(KVStoreSetOptimizer(mp.h, "test(multi_precision=1)"));
    CHECK_OK(KVStoreSetOptimizer(plain.h, "test"));
    Array w0(KV_FLOAT16, 1);
    w0.Set(std::vector<uint16_t>{0});
    int key = 0;
    CHECK_OK(KVStoreInit(mp.h, 1, &key, &w0.h));
    CHECK_OK(KVStoreInit(plain.h, 1, &key, &w0.h));
    for (int step = 0; step < 3; ++step) {
      PushHalves(mp.h, gs);
      PushHalves(plain.h, gs);
      const uint16_t got = PullHalves(mp.h, 1)[0];
      CHECK_MSG(got == want[step], "%s step %d: got 0x%04x want 0x%04x", store_type, step + 1,
                got, want[step]);
    }
    CHECK(PullHalves(plain.h, 1)[0] == 0x6A00);
    // A store without an optimizer assigns the float16 sum, multi_precision or not.
    Store assign(store_type);
    CHECK_OK(KVStoreInit(assign.h, 1, &key, &w0.h));
    PushHalves(assign.h, gs);
    CHECK(PullHalves(assign.h, 1)[0] == 0x6400);
  }
}

void TestMultiPrecisionFailedPushKeepsMaster() {
  // sgd(lr=1, momentum=0.5, multi_precision=1), float16 key 0 at 1 and int32 key 1: a push of
  // {0, 1} fails on key 1 and must move neither the master copy nor the momentum of key 0.
  // Gradient 2^-12: step 1 mom = -2^-12, master 1 - 2^-12 (stored 1: below half an ulp);
  // step 2 mom = -1.5 * 2^-12, master 1 - 2.5 * 2^-12 = 0.99939 -> 0x3BFF (1 - 2^-11)
  // (had the failed call stepped the master too, it would be 1 - 4.25 * 2^-12 -> 0x3BFE).
  for (const char* store_type : {"local", "device"}) {
    Store s(store_type);
    CHECK_OK(KVStoreSetOptimizer(s.h, "sgd(lr=1,momentum=0.5,multi_precision=1)"));
    Array w0(KV_FLOAT16, 1), g(KV_FLOAT16, 1), wi(KV_INT32, 1);
    w0.Set(std::vector<uint16_t>{0x3C00});
    g.Set(std::vector<uint16_t>{0x0C00});  // 2^-12
    wi.Set(std::vector<int32_t>{7});
    int k0 = 0, k1 = 1;
    CHECK_OK(KVStoreInit(s.h, 1, &k0, &w0.h));
    CHECK_OK(KVStoreInit(s.h, 1, &k1, &wi.h));
    CHECK_OK(KVStorePush(s.h, 1, &k0, &g.h, 0));
    CHECK(PullHalves(s.h, 1)[0] == 0x3C00);
    const int keys[2] = {0, 1};
    const KVArrayHandle vals[2] = {g.h, wi.h};
    CHECK_ERR(KVStorePush(s.h, 2, keys, vals, 0), KV_ERR_NOT_SUPPORTED, "int32");
    CHECK_OK(KVStorePush(s.h, 1, &k0, &g.h, 0));
    const uint16_t got = PullHalves(s.h, 1)[0];
    CHECK_MSG(got == 0x3BFF, "%s: got 0x%04x want 0x3bff", store_type, got);
  }
}

void TestConcurrentKeys() {
  // Pushes of different keys from several threads give exactly the values of a serial run.
  const int kKeys = 4, kSteps = 200;
  const char* spec = "adam(lr=0.01,wd=0.001)";
  std::vector<float> w0(64);
  for (size_t i = 0; i < w0.size(); ++i) w0[i] = 0.01f * static_cast<float>(i);
  Fixture<float> par(spec, w0, kKeys);
  Fixture<float> ser(spec, w0, kKeys);
  auto grad = [](int key, int step) {
    std::vector<float> g(64);
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = std::sin(0.1f * static_cast<float>(i + 7 * key + 13 * step));
    }
    return g;
  };
  std::vector<std::thread> threads;
  std::vector<int> failures(kKeys, 0);
  for (int k = 0; k < kKeys; ++k) {
    threads.emplace_back([&, k] {
      for (int s = 0; s < kSteps; ++s) {
        if (par.Push(grad(k, s), k) != 0) ++failures[k];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int s = 0; s < kSteps; ++s) {
    for (int k = 0; k < kKeys; ++k) CHECK_OK(ser.Push(grad(k, s), k));
  }
  for (int k = 0; k < kKeys; ++k) {
    CHECK(failures[k] == 0);
    std::vector<float> a = par.Pull(k), b = ser.Pull(k);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    CHECK(a != w0);  // the updates did happen
  }
}

void TestLargeArrayMatchesChunks() {
  // A large array is updated on the CPU worker pool (ctest sets KVSTORE_CPU_THREADS=4); small
  // ones on the calling thread. One 2^21-element key must end up bit-identical to the same
  // data held as 32 keys of 2^16 elements (each below the parallel threshold), for adam
  // (two state slots) over three steps.
  const size_t kN = size_t{1} << 21, kChunk = size_t{1} << 16, kChunks = kN / kChunk;
  const char* spec = "adam(lr=0.01,wd=0.01,clip_gradient=0.8)";
  auto value = [](size_t i, int step) {
    return 0.5f * std::sin(0.001f * static_cast<float>(i) + static_cast<float>(step));
  };
  {
    std::vector<float> w0(kN);
    for (size_t i = 0; i < kN; ++i) w0[i] = value(i, 7);
    Fixture<float> big(spec, w0);
    Store small;
    CHECK_OK(KVStoreSetOptimizer(small.h, spec));
    for (size_t c = 0; c < kChunks; ++c) {
      int key = static_cast<int>(c);
      Array a(KV_FLOAT32, kChunk);
      a.Set(std::vector<float>(w0.begin() + c * kChunk, w0.begin() + (c + 1) * kChunk));
      CHECK_OK(KVStoreInit(small.h, 1, &key, &a.h));
    }
    for (int step = 0; step < 3; ++step) {
      std::vector<float> g(kN);
      for (size_t i = 0; i < kN; ++i) g[i] = value(i, step);
      CHECK_OK(big.Push(g));
      for (size_t c = 0; c < kChunks; ++c) {
        int key = static_cast<int>(c);
        Array a(KV_FLOAT32, kChunk);
        a.Set(std::vector<float>(g.begin() + c * kChunk, g.begin() + (c + 1) * kChunk));
        CHECK_OK(KVStorePush(small.h, 1, &key, &a.h, 0));
      }
    }
    std::vector<float> got = big.Pull();
    bool same = true;
    for (size_t c = 0; c < kChunks && same; ++c) {
      int key = static_cast<int>(c);
      Array a(KV_FLOAT32, kChunk);
      CHECK_OK(KVStorePull(small.h, 1, &key, &a.h, 0));
      std::vector<float> part = a.Get<float>(kChunk);
      same = std::memcmp(part.data(), got.data() + c * kChunk, kChunk * sizeof(float)) == 0;
    }
    CHECK(same);
    CHECK(got != w0);
  }
}

void TestGpuStaging() {
  // Values on a GPU are updated through host copies: a `device` store keeping its values on
  // GPU 0 must give bit-identical weights to a `local` store on the CPU. Skipped (status 77)
  // without a GPU.
  int gpus = 0;
  CHECK_OK(KVGetGpuCount(&gpus));
  if (gpus == 0) {
    check_skip("no GPU");
    return;
  }
  const char* spec = "adam(lr=0.01,wd=0.01)";
  const int64_t n = 1000;
  std::vector<float> w0(n), g(n);
  for (int64_t i = 0; i < n; ++i) w0[i] = 0.001f * static_cast<float>(i);
  Store dev("device"), cpu;
  CHECK_OK(KVStoreSetOptimizer(dev.h, spec));
  CHECK_OK(KVStoreSetOptimizer(cpu.h, spec));
  KVArrayHandle wg = nullptr, gg = nullptr;
  CHECK_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_GPU, 0, &wg));
  CHECK_OK(KVArrayCreate(&n, 1, KV_FLOAT32, KV_GPU, 0, &gg));
  Array wc(KV_FLOAT32, n), gc(KV_FLOAT32, n);
  CHECK_OK(KVArrayCopyFromHost(wg, w0.data(), n * sizeof(float)));
  wc.Set(w0);
  int key = 0;
  CHECK_OK(KVStoreInit(dev.h, 1, &key, &wg));
  CHECK_OK(KVStoreInit(cpu.h, 1, &key, &wc.h));
  for (int step = 0; step < 3; ++step) {
    for (int64_t i = 0; i < n; ++i) g[i] = std::cos(0.01f * static_cast<float>(i + 31 * step));
    CHECK_OK(KVArrayCopyFromHost(gg, g.data(), n * sizeof(float)));
    gc.Set(g);
    CHECK_OK(KVStorePush(dev.h, 1, &key, &gg, 0));
    CHECK_OK(KVStorePush(cpu.h, 1, &key, &gc.h, 0));
  }
  CHECK_OK(KVStorePull(dev.h, 1, &key, &wc.h, 0));
  std::vector<float> a = wc.Get<float>(n);
  CHECK_OK(KVStorePull(cpu.h, 1, &key, &wc.h, 0));
  std::vector<float> b = wc.Get<float>(n);
  CHECK(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
  CHECK(a != w0);
  KVArrayFree(wg);
  KVArrayFree(gg);
}

// ---------------------------------------------------------------------------------------
// spec parsing

void TestSpecAccepted() {
  Store s;
  CHECK_OK(KVStoreSetOptimizer(s.h, "sgd"));
  CHECK_OK(KVStoreSetOptimizer(s.h, "  SGD ( lr = 0.5 , momentum=0.9 )  "));
  CHECK_OK(KVStoreSetOptimizer(s.h, "adam()"));
  CHECK_OK(KVStoreSetOptimizer(s.h, "Adam(beta1=0,beta2=0.5,epsilon=1E-3)"));
  CHECK_OK(KVStoreSetOptimizer(s.h, "rmsprop(gamma1=0.95,clip_weights=2)"));
  CHECK_OK(KVStoreSetOptimizer(s.h, "adagrad(epsilon=1e-6)"));
  CHECK_OK(KVStoreSetOptimizer(s.h, "nag(lr=+.5,momentum=1,clip_gradient=-1)"));
  CHECK_OK(KVStoreSetOptimizer(s.h, "test(rescale_grad=-2)"));
  for (const char* name : {"sgd", "nag", "adam", "adagrad", "rmsprop", "test"}) {
    for (const char* mp : {"0", "1"}) {
      const std::string spec = std::string(name) + "(multi_precision=" + mp + ")";
      CHECK_OK(KVStoreSetOptimizer(s.h, spec.c_str()));
    }
  }
  // The spec is what the updater does: "sgd( lr = 0.5 )" with spaces updates as lr 0.5.
  Fixture<double> f(" sgd ( lr = 0.5 ) ", {1.0});
  CHECK_OK(f.Push({1.0}));
  CHECK_NEAR(f.Pull()[0], 0.5, kF64);
}

void TestSpecErrors() {
  // Each spec is refused with INVALID_ARGUMENT and a message containing the text beside it.
  const struct {
    const char* spec;
    const char* needle;
  } refused[] = {
      {"foo(lr=1)", "unknown optimizer \"foo\""},
      {"foo", "sgd, nag, adam, adagrad, rmsprop, test"},
      {"sgd(beta1=0.9)", "optimizer sgd has no parameter \"beta1\""},
      {"sgd(beta1=0.9)", "learning_rate (alias lr), momentum, wd, rescale_grad, clip_gradient"},
      {"test(lr=1)", "valid parameters: rescale_grad"},
      {"sgd(lr=abc)", "\"abc\" of 'lr' is not a finite number"},
      {"sgd(lr=0.1x)", "0.1x"},
      {"sgd(lr=nan)", "nan"},
      {"sgd(lr=inf)", "inf"},
      {"sgd(lr=1e999)", "1e999"},
      {"sgd(lr=)", "of 'lr'"},
      {"sgd(lr=0,5)", "expected a parameter name at offset 9"},
      {"sgd(lr=0.1", "expected ',' or ')'"},
      {"sgd(lr 0.1)", "expected '=' after 'lr'"},
      {"sgd lr=1", "unexpected text after the spec"},
      {"sgd(lr=1))", "unexpected text after the spec"},
      {"", "expected an optimizer name"},
      {"(lr=1)", "expected an optimizer name"},
      {"sgd(lr=0.1,learning_rate=0.2)", "given twice (as \"lr\" and \"learning_rate\")"},
      {"adam(beta1=1)", "\"beta1\" of optimizer adam must be in [0, 1), got 1"},
      {"adam(epsilon=0)", "must be > 0"},
      {"sgd(lr=-0.1)", "must be >= 0"},
      {"sgd(momentum=1.5)", "must be in [0, 1]"},
      {"sgd(multi_precision=2)", "\"multi_precision\" of optimizer sgd must be 0 or 1, got 2"},
      {"test(multi_precision=0.5)", "must be 0 or 1"},
  };
  Store s;
  for (const auto& r : refused) {
    CHECK_ERR(KVStoreSetOptimizer(s.h, r.spec), KV_ERR_INVALID_ARGUMENT, r.needle);
  }
  CHECK_ERR(KVStoreSetOptimizer(s.h, nullptr), KV_ERR_NULL_POINTER, nullptr);
}

void TestSpecLocale() {
  // Numbers are read in the C locale whatever LC_NUMERIC says. The C.utf8 locale is the only
  // other one guaranteed on Debian; try a comma-decimal locale when installed.
  const char* comma_locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
  const char* set = nullptr;
  for (const char* name : comma_locales) {
    if (std::setlocale(LC_NUMERIC, name) != nullptr) {
      set = name;
      break;
    }
  }
  if (set == nullptr) std::setlocale(LC_NUMERIC, "C.UTF-8");
  Fixture<double> f("sgd(lr=0.25)", {1.0});
  CHECK_OK(f.Push({1.0}));
  CHECK_NEAR(f.Pull()[0], 0.75, kF64);
  Store s;
  CHECK_ERR(KVStoreSetOptimizer(s.h, "sgd(lr=0,25)"), KV_ERR_INVALID_ARGUMENT, nullptr);
  std::setlocale(LC_NUMERIC, "C");
}

void TestSpecErrorTruncated() {
  // A spec is quoted in errors by its first 200 bytes and its size, so a 10 MB spec does not
  // make a 10 MB (or 20 MB) message. One case per place that quotes spec text.
  const std::string big(10 * 1000 * 1000, 'x');
  const std::string specs[] = {
      big,                     // unknown optimizer: its name and the spec
      "sgd(" + big + "=1)",    // unknown parameter
      "sgd(lr=1" + big + ")",  // a value that is not a number
      "sgd(lr=1," + big + ")",  // '=' expected after a parameter name
      "sgd(lr=1) " + big,      // trailing text
  };
  Store s;
  for (const std::string& spec : specs) {
    CHECK_ERR(KVStoreSetOptimizer(s.h, spec.c_str()), KV_ERR_INVALID_ARGUMENT, "bytes)");
    const std::string msg = KVGetLastError();
    CHECK_MSG(msg.size() < 1500, "message of %zu bytes for a %zu-byte spec", msg.size(),
              spec.size());
    // The quoted text states the size of what it cut ("xxx... (10000000 bytes)").
    CHECK(msg.find("xxx... (100000") != std::string::npos);
  }
  // Short specs are still quoted whole.
  CHECK_ERR(KVStoreSetOptimizer(s.h, "sgd(lr=0.1x)"), KV_ERR_INVALID_ARGUMENT,
            "invalid optimizer spec \"sgd(lr=0.1x)\"");
}

const TestCase kCases[] = {
    {"sgd_plain", TestSgdPlain},
    {"sgd_momentum", TestSgdMomentum},
    {"sgd_state_per_key", TestSgdStatePerKey},
    {"sgd_string_keys", TestSgdStringKeys},
    {"clip_zero_and_negative", TestClipZeroAndNegative},
    {"nag", TestNag},
    {"nag_without_momentum", TestNagWithoutMomentum},
    {"adam_bias_correction", TestAdamBiasCorrection},
    {"adam_clip_after_wd", TestAdamClipAfterWeightDecay},
    {"adam_step_count_per_key", TestAdamStepCountPerKey},
    {"adagrad", TestAdaGrad},
    {"rmsprop", TestRmsProp},
    {"rmsprop_clipping", TestRmsPropClipping},
    {"rmsprop_centered", TestRmsPropCentered},
    {"matches_reference_sgd", TestMatchesReferenceSgd},
    {"matches_reference_nag", TestMatchesReferenceNag},
    {"matches_reference_adam", TestMatchesReferenceAdam},
    {"matches_reference_adagrad", TestMatchesReferenceAdaGrad},
    {"matches_reference_rmsprop", TestMatchesReferenceRmsProp},
    {"failed_push_keeps_state", TestFailedPushKeepsState},
    {"failed_push_keeps_state_str", TestFailedPushKeepsStateStringKeys},
    {"test_optimizer", TestTestOptimizer},
    {"integer_rejected", TestIntegerRejected},
    {"float16", TestFloat16},
    {"float16_state_is_float", TestFloat16StateIsFloat},
    {"multi_precision_matches_float32", TestMultiPrecisionMatchesFloat32},
    {"multi_precision_sums_in_float32", TestMultiPrecisionSumsInFloat32},
    {"multi_precision_large_array", TestMultiPrecisionLargeArray},
    {"multi_precision_failed_push_keeps_master", TestMultiPrecisionFailedPushKeepsMaster},
    {"multi_precision_wide_unaffected", TestMultiPrecisionWideUnaffected},
    {"concurrent_keys", TestConcurrentKeys},
    {"large_array_matches_chunks", TestLargeArrayMatchesChunks},
    {"gpu_staging", TestGpuStaging},
    {"spec_accepted", TestSpecAccepted},
    {"spec_errors", TestSpecErrors},
    {"spec_locale", TestSpecLocale},
    {"spec_error_truncated", TestSpecErrorTruncated},
};

}  // namespace

int main(int argc, char** argv) { return RunCases(argc, argv, kCases); }
