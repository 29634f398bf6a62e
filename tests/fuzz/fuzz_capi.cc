// fuzz_capi.cc - random call sequences against the C ABI, checked against a shadow model.
//
// The program drives the public header only. A run is a series of sessions; each session
// creates one store of a random in-process type (local, device and their aliases; or, with
// --dist, the distributed store of the job it was launched in) and makes random calls on it:
// init, push, pull, pushpull and broadcast with int or string keys, C updaters that fail on
// chosen keys (some after scribbling over the stored value, some calling the store and
// KVStoreFree from inside, which must be refused), built-in optimizers from valid
// and malformed specs, the distributed-only setters and queries, and array calls. About a
// third of the calls carry one injected fault: a NULL store, key list, array list, array or
// string key, a negative count, the other key kind, an unknown key, a repeated or
// already-initialised key, a wrong shape or dtype, mismatched pushpull or broadcast key sets.
//
// The shadow model. For every stored key the model holds its dtype and shape, the exact
// bytes last read back from the store, the value in double precision and, for sgd with
// momentum, the momentum. Before each call the model predicts its outcome: success, or
// failure with the code of the injected fault (or CALLBACK / NOT_SUPPORTED when an updater
// or optimizer must refuse a key). After each call:
//   - the return code must match the prediction (a failure with the predicted code);
//   - every stored key is pulled: after a failed call it must be bit-identical to the
//     bytes before the call ("a failed call changes nothing"), and after a successful one
//     it must equal the model within the dtype's tolerance (exact for integer dtypes);
//   - outputs of a failed pull, pushpull or broadcast still hold what they held before;
//   - every callback registration is released exactly once (counted through free_fn).
// A model of the optimizer state makes "a failed push moves no optimizer state" checkable:
// the next successful push after a failed one must match a model in which the failed call
// never happened. After every check the model adopts the bytes read back (the store
// computes in float for float16/float32), so rounding never accumulates across calls.
// Optimizers other than sgd and test are not modelled: with them the values of a successful
// push are adopted unchecked, while failed calls are still checked bit for bit.
//
// Reproduction. Every session's calls derive from (seed, session index) alone, so
// `fuzz_capi --seed S --session K --trace` replays the failing session call by call. A
// violation prints the seed, the session, the call number and the session's last calls.
#include <kvstore/kvstore.h>

#include <cctype>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rng.h"

namespace {

using kvstore_fuzz::Mix;
using kvstore_fuzz::Rng;

// ---------------------------------------------------------------------------------------
// Element types, encoding and rounding

// Every dtype, on every store: a distributed worker refuses a key its servers' optimizer
// cannot update before the push leaves, so the call's own return code says it there too.
const std::vector<int> kAllDTypes = {KV_FLOAT32, KV_FLOAT64, KV_FLOAT16, KV_UINT8, KV_INT32, KV_INT64};
const std::vector<int>& StoreDTypes() { return kAllDTypes; }

bool IsInt(int dt) { return dt == KV_UINT8 || dt == KV_INT32 || dt == KV_INT64; }

const char* DName(int dt) {
  switch (dt) {
    case KV_FLOAT32: return "f32";
    case KV_FLOAT64: return "f64";
    case KV_FLOAT16: return "f16";
    case KV_UINT8: return "u8";
    case KV_INT32: return "i32";
    case KV_INT64: return "i64";
    default: return "?";
  }
}

// IEEE binary16 from float, round to nearest even (what the library's conversion does).
uint16_t ToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = static_cast<int>((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  const int e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // a carry rounds into the exponent
  return static_cast<uint16_t>(sign | h);
}

double FromHalf(uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * std::ldexp(1024 + m, e - 25);
}

double Wrap(double x, double modulus, double lo) {
  double r = std::fmod(x - lo, modulus);
  if (r < 0) r += modulus;
  return r + lo;
}

// The value of `x` after storing it in dtype `dt` (integers wrap like the library's
// integer arithmetic; model values of integer keys are always integral).
double RoundTo(int dt, double x) {
  switch (dt) {
    case KV_FLOAT32: return static_cast<double>(static_cast<float>(x));
    case KV_FLOAT16: return FromHalf(ToHalf(static_cast<float>(x)));
    case KV_UINT8: return Wrap(x, 256.0, 0.0);
    case KV_INT32: return Wrap(x, 4294967296.0, -2147483648.0);
    default: return x;
  }
}

std::string Encode(int dt, const std::vector<double>& v) {
  std::string b(v.size() * KVDTypeSize(dt), '\0');
  char* p = &b[0];
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dt) {
      case KV_FLOAT32: { float f = static_cast<float>(v[i]); std::memcpy(p + 4 * i, &f, 4); break; }
      case KV_FLOAT64: std::memcpy(p + 8 * i, &v[i], 8); break;
      case KV_FLOAT16: { uint16_t h = ToHalf(static_cast<float>(v[i])); std::memcpy(p + 2 * i, &h, 2); break; }
      case KV_UINT8: p[i] = static_cast<char>(static_cast<uint8_t>(v[i])); break;
      case KV_INT32: { int32_t x = static_cast<int32_t>(v[i]); std::memcpy(p + 4 * i, &x, 4); break; }
      case KV_INT64: { int64_t x = static_cast<int64_t>(v[i]); std::memcpy(p + 8 * i, &x, 8); break; }
    }
  }
  return b;
}

std::vector<double> Decode(int dt, const std::string& b) {
  const size_t n = b.size() / KVDTypeSize(dt);
  std::vector<double> v(n);
  const char* p = b.data();
  for (size_t i = 0; i < n; ++i) {
    switch (dt) {
      case KV_FLOAT32: { float f; std::memcpy(&f, p + 4 * i, 4); v[i] = f; break; }
      case KV_FLOAT64: std::memcpy(&v[i], p + 8 * i, 8); break;
      case KV_FLOAT16: { uint16_t h; std::memcpy(&h, p + 2 * i, 2); v[i] = FromHalf(h); break; }
      case KV_UINT8: v[i] = static_cast<uint8_t>(p[i]); break;
      case KV_INT32: { int32_t x; std::memcpy(&x, p + 4 * i, 4); v[i] = x; break; }
      case KV_INT64: { int64_t x; std::memcpy(&x, p + 8 * i, 8); v[i] = static_cast<double>(x); break; }
    }
  }
  return v;
}

// Agreement of a stored element with the model: exact for integers; for floats a relative
// bound of a few units of the dtype's precision (the store computes float16/float32 in
// float, the model in double, and both round the result once per call).
bool Close(int dt, double want, double got) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return want == got;
  double rel = 0;
  switch (dt) {
    case KV_FLOAT64: rel = 1e-6; break;  // sgd's hyper-parameters are float32 (see ModelUpdate)
    case KV_FLOAT32: rel = 1e-4; break;
    case KV_FLOAT16: rel = 4e-3; break;
    default: return want == got;
  }
  return std::fabs(want - got) <= rel * (1.0 + std::fabs(want));
}

using Shape = std::vector<int64_t>;

int64_t NumElems(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string ShapeText(const Shape& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

// ---------------------------------------------------------------------------------------
// Failure reporting

struct Run {
  uint64_t seed = 0;
  uint64_t session = 0;
  uint64_t call_in_session = 0;
  bool trace = false;
  std::deque<std::string> recent;  // the current session's last calls
  // totals
  uint64_t calls = 0, calls_failed = 0, sessions = 0, verify_pulls = 0, elements_checked = 0;
  uint64_t updater_runs = 0;
} g_run;

void Note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void Note(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (g_run.trace) std::printf("  [%" PRIu64 "] %s\n", g_run.call_in_session, buf);
  g_run.recent.push_back("[" + std::to_string(g_run.call_in_session) + "] " + buf);
  if (g_run.recent.size() > 40) g_run.recent.pop_front();
}

[[noreturn]] void Violation(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void Violation(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\nfuzz_capi: VIOLATION in seed %" PRIu64 " session %" PRIu64
               " call %" PRIu64 ": %s\n", g_run.seed, g_run.session, g_run.call_in_session, buf);
  std::fprintf(stderr, "last error: %s\nthe session's last calls:\n", KVGetLastError());
  for (const std::string& c : g_run.recent) std::fprintf(stderr, "  %s\n", c.c_str());
  std::fprintf(stderr, "replay: fuzz_capi --seed %" PRIu64 " --session %" PRIu64 " --trace\n",
               g_run.seed, g_run.session);
  std::exit(1);
}

// The code the call returned against the prediction: 0, or one of `want` (non-empty).
void Expect(int rc, const std::vector<int>& want, const char* what) {
  if (rc != 0) ++g_run.calls_failed;
  if (want.empty()) {
    if (rc != 0) Violation("%s failed with %s; the model says it succeeds", what, KVErrorName(rc));
    return;
  }
  if (rc == 0) Violation("%s succeeded; the model says it fails with %s", what, KVErrorName(want[0]));
  for (int w : want) {
    if (rc == w) return;
  }
  Violation("%s failed with %s; the model says %s", what, KVErrorName(rc), KVErrorName(want[0]));
}

// ---------------------------------------------------------------------------------------
// Arrays

KVArrayHandle MakeArray(int dt, const Shape& s, int dev, const std::vector<double>& vals) {
  KVArrayHandle a = nullptr;
  int rc = KVArrayCreate(s.data(), static_cast<int>(s.size()), dt, KV_CPU, dev, &a);
  if (rc != 0) Violation("KVArrayCreate %s %s cpu(%d): %s", DName(dt), ShapeText(s).c_str(), dev, KVErrorName(rc));
  const std::string b = Encode(dt, vals);
  rc = KVArrayCopyFromHost(a, b.data(), b.size());
  if (rc != 0) Violation("KVArrayCopyFromHost: %s", KVErrorName(rc));
  return a;
}

std::string ReadBytes(KVArrayHandle a) {
  size_t nb = 0;
  int rc = KVArrayGetNBytes(a, &nb);
  if (rc != 0) Violation("KVArrayGetNBytes: %s", KVErrorName(rc));
  std::string b(nb, '\0');
  rc = KVArrayCopyToHost(a, nb ? &b[0] : nullptr, nb);
  if (rc != 0) Violation("KVArrayCopyToHost: %s", KVErrorName(rc));
  return b;
}

// Arrays made for one call, freed when it ends (a handle listed twice is freed once).
struct Owned {
  std::set<KVArrayHandle> arrays;
  KVArrayHandle Add(KVArrayHandle a) {
    arrays.insert(a);
    return a;
  }
  ~Owned() {
    for (KVArrayHandle a : arrays) KVArrayFree(a);
  }
};

std::vector<double> GenValues(Rng& r, int dt, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    switch (dt) {
      case KV_UINT8: x = r.Int(0, 20); break;
      case KV_INT32:
      case KV_INT64: x = r.Int(-20, 20); break;
      default: x = r.Int(-16, 16) / 4.0; break;
    }
  }
  return v;
}

Shape GenShape(Rng& r) {
  Shape s(static_cast<size_t>(r.Int(0, 3)));
  for (int64_t& d : s) d = r.Chance(4) ? 0 : r.Int(1, 3);
  return s;
}

// A shape that differs from `s`: a dim changed, added or removed (a scalar vs (1,) too).
Shape OtherShape(Rng& r, const Shape& s) {
  Shape o = s;
  const int how = s.empty() ? 1 : r.Int(0, 2);
  if (how == 0) o[static_cast<size_t>(r.Int(0, static_cast<int>(s.size()) - 1))] += 1;
  else if (how == 1) o.push_back(1);
  else o.pop_back();
  return o;
}

int OtherDType(Rng& r, int dt) {
  int o = dt;
  while (o == dt) o = r.Pick(kAllDTypes);
  return o;
}

// ---------------------------------------------------------------------------------------
// C updaters with a model-visible behaviour

constexpr uint32_t kLive = 0xC0FFEE11u;
std::set<void*> g_freed;  // user_data released by free_fn since its allocation
int g_busy_code = 0;      // KV_ERR_BUSY when the library has it (KVStoreFree in a call)
int64_t g_live_regs = 0;  // registrations handed to a store and not yet released

struct CbData {
  uint32_t magic = kLive;
  int mode = 0;  // 0: stored += recv; 1: stored = 2 * recv
  std::set<int> fail_ids;
  std::set<std::string> fail_names;
  bool scribble = false;  // overwrite the stored value before failing
  bool probe = false;     // call the store from inside: every such call must be refused
  KVStoreHandle store = nullptr;
};

void FreeCb(void* p) {
  auto* d = static_cast<CbData*>(p);
  if (d->magic != kLive) Violation("free_fn ran on user_data that was already released");
  d->magic = 0;
  --g_live_regs;
  g_freed.insert(d);
  delete d;
}

void ProbeFromUpdater(CbData* d) {
  int rc = KVStorePull(d->store, 0, nullptr, nullptr, 0);
  if (rc == 0) Violation("a pull from inside the store's own updater succeeded");
  if (g_busy_code != 0) {
    rc = KVStoreFree(d->store);
    if (rc != g_busy_code) Violation("KVStoreFree from inside the store's updater returned %s, not KV_ERR_BUSY", KVErrorName(rc));
  }
}

int ApplyCb(const CbData* d, KVArrayHandle recv, KVArrayHandle stored) {
  return d->mode == 0 ? KVArrayBinary(KV_OP_ADD, stored, recv, stored)
                      : KVArrayBinaryScalar(KV_OP_MUL, recv, 2.0, stored);
}

int IntUpdater(int key, KVArrayHandle recv, KVArrayHandle stored, void* ud) {
  auto* d = static_cast<CbData*>(ud);
  if (d->magic != kLive) Violation("the updater ran with released user_data");
  ++g_run.updater_runs;
  if (d->probe) ProbeFromUpdater(d);
  if (d->fail_ids.count(key)) {
    if (d->scribble) KVArrayFill(stored, 99);
    return 7;
  }
  return ApplyCb(d, recv, stored);
}

int StrUpdater(const char* key, KVArrayHandle recv, KVArrayHandle stored, void* ud) {
  auto* d = static_cast<CbData*>(ud);
  if (d->magic != kLive) Violation("the string updater ran with released user_data");
  ++g_run.updater_runs;
  if (d->probe) ProbeFromUpdater(d);
  if (d->fail_names.count(key)) {
    if (d->scribble) KVArrayFill(stored, 99);
    return -3;
  }
  return ApplyCb(d, recv, stored);
}

// ---------------------------------------------------------------------------------------
// The shadow model

enum class UKind { kAssign, kCallback, kSgd, kTest, kOpaque };

struct UpdaterModel {
  UKind kind = UKind::kAssign;
  CbData* cb = nullptr;  // owned by the store
  double lr = 0, momentum = 0, wd = 0, rescale = 1, clip = -1;
};

struct KeyModel {
  bool is_str = false;
  int id = 0;  // the int key, or the store's internal id of a string key (init order)
  std::string name;
  int dtype = 0;
  Shape shape;
  std::vector<double> val;  // the value, adopted from `bytes` after every check
  std::string bytes;        // exactly what the store held at the last check
  std::vector<double> mom;  // sgd momentum; empty until the optimizer's first update
  KVArrayHandle out = nullptr;  // for the pulls of the checks
  std::string Display() const { return is_str ? "\"" + name + "\"" : std::to_string(id); }
};

struct StoreModel {
  KVStoreHandle h = nullptr;
  std::string type;
  bool dist = false;
  int kind = 0;  // 0 none yet, 1 int, 2 string
  std::map<int, KeyModel> ints;
  std::map<std::string, KeyModel> strs;
  int next_str_id = 0;
  UpdaterModel upd, str_upd;

  size_t NumKeys() const { return ints.size() + strs.size(); }
  KeyModel* Find(bool is_str, int k, const std::string& s) {
    if (is_str) {
      auto it = strs.find(s);
      return it == strs.end() ? nullptr : &it->second;
    }
    auto it = ints.find(k);
    return it == ints.end() ? nullptr : &it->second;
  }
  std::vector<KeyModel*> All() {
    std::vector<KeyModel*> v;
    for (auto& kv : ints) v.push_back(&kv.second);
    for (auto& kv : strs) v.push_back(&kv.second);
    return v;
  }
  int64_t ExpectedRegs() const {
    return (upd.kind == UKind::kCallback ? 1 : 0) + (str_upd.kind == UKind::kCallback ? 1 : 0);
  }
};

// Computes what a push must store for key `k` given the sum of its values. Returns 0 and
// sets *out (and *mom for sgd with momentum), or the error the store must return.
// *unchecked is set for optimizers the model does not know.
int ModelUpdate(const StoreModel& m, const KeyModel& k, const std::vector<double>& sum,
                std::vector<double>* out, std::vector<double>* mom, bool* unchecked) {
  const int dt = k.dtype;
  const size_t n = sum.size();
  out->assign(n, 0);
  *mom = k.mom;
  const UpdaterModel& u = (k.is_str && m.str_upd.kind == UKind::kCallback) ? m.str_upd : m.upd;
  switch (u.kind) {
    case UKind::kAssign:
      *out = sum;
      return 0;
    case UKind::kCallback: {
      const bool fail = (&u == &m.str_upd) ? u.cb->fail_names.count(k.name) > 0 : u.cb->fail_ids.count(k.id) > 0;
      if (fail) return KV_ERR_CALLBACK;
      for (size_t i = 0; i < n; ++i) {
        (*out)[i] = RoundTo(dt, u.cb->mode == 0 ? k.val[i] + sum[i] : 2 * sum[i]);
      }
      return 0;
    }
    case UKind::kSgd: {
      // The reference's fused sgd operators take float32 hyper-parameters, for float64
      // weights too: g' = clip(rescale * g) + wd * w; mom = momentum * mom - lr * g'; w += mom.
      if (IsInt(dt)) return KV_ERR_NOT_SUPPORTED;
      // One volatile float per value: GCC 12.2's basic-block SLP vectoriser at -O2 drops the
      // rounding of a straight-line group of (double)(float)x conversions.
      auto f32 = [](double x) {
        volatile float f = static_cast<float>(x);
        return static_cast<double>(f);
      };
      const double lr = f32(u.lr), wd = f32(u.wd), rescale = f32(u.rescale), clip = f32(u.clip);
      const double momentum = f32(u.momentum);
      if (momentum != 0 && mom->empty()) mom->assign(n, 0.0);
      for (size_t i = 0; i < n; ++i) {
        double g = rescale * sum[i];
        if (u.clip >= 0) g = std::min(std::max(g, -clip), clip);
        g += wd * k.val[i];
        double w = k.val[i];
        if (momentum != 0) {
          (*mom)[i] = momentum * (*mom)[i] - lr * g;
          w += (*mom)[i];
        } else {
          w -= lr * g;
        }
        (*out)[i] = RoundTo(dt, w);
      }
      return 0;
    }
    case UKind::kTest:
      if (IsInt(dt) && u.rescale != 1) return KV_ERR_NOT_SUPPORTED;
      for (size_t i = 0; i < n; ++i) (*out)[i] = RoundTo(dt, k.val[i] + u.rescale * sum[i]);
      return 0;
    case UKind::kOpaque:
      if (IsInt(dt)) return KV_ERR_NOT_SUPPORTED;
      *unchecked = true;
      return 0;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// Key lists of one call

struct KeyRef {
  bool is_str = false;
  int i = 0;
  std::string s;
  std::string Display() const { return is_str ? "\"" + s + "\"" : std::to_string(i); }
  bool operator<(const KeyRef& o) const {
    return is_str != o.is_str ? is_str < o.is_str : is_str ? s < o.s : i < o.i;
  }
  bool operator==(const KeyRef& o) const { return !(*this < o) && !(o < *this); }
};

KeyRef RefOf(const KeyModel& k) {
  KeyRef r;
  r.is_str = k.is_str;
  r.i = k.id;
  r.s = k.name;
  return r;
}

struct CallList {
  bool is_str = false;
  std::vector<KeyRef> keys;
  std::vector<int> ints;
  std::vector<std::string> names;
  std::vector<const char*> cnames;
  std::vector<KVArrayHandle> arrays;
  bool null_keys = false, null_arrays = false;
  bool negative = false;
  int neg_num = -1;

  void Add(const KeyRef& k, KVArrayHandle a) {
    keys.push_back(k);
    arrays.push_back(a);
  }
  // Builds the C arrays; faults that edit them are applied afterwards.
  void Finish() {
    ints.clear();
    names.clear();
    for (const KeyRef& k : keys) {
      ints.push_back(k.i);
      names.push_back(k.s);
    }
    cnames.clear();
    for (const std::string& n : names) cnames.push_back(n.c_str());
  }
  int Num() const { return negative ? neg_num : static_cast<int>(keys.size()); }
  const int* K() const { return null_keys ? nullptr : ints.data(); }
  const char* const* S() const { return null_keys ? nullptr : cnames.data(); }
  const KVArrayHandle* A() const { return null_arrays ? nullptr : arrays.data(); }
  std::string Text() const {
    std::string t = negative ? "num=" + std::to_string(neg_num) + " " : "";
    if (null_keys) t += "keys=NULL ";
    if (null_arrays) t += "arrays=NULL ";
    t += "[";
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i) t += ", ";
      if (is_str && cnames.size() > i && cnames[i] == nullptr) t += "NULL";
      else t += keys[i].is_str ? "\"" + keys[i].s.substr(0, 12) + "\"" : std::to_string(keys[i].i);
      t += ":";
      if (arrays[i] == nullptr) {
        t += "NULL";
      } else {
        int dt = 0, ndim = 0;
        int64_t dims[KV_MAX_NDIM];
        KVArrayGetDType(arrays[i], &dt);
        KVArrayGetShape(arrays[i], dims, KV_MAX_NDIM, &ndim);
        t += std::string(DName(dt)) + ShapeText(Shape(dims, dims + ndim));
      }
    }
    return t + "]";
  }
};

// List faults: what one bad argument makes the call return.
enum Fault {
  kNone, kNullStore, kNegNum, kNullKeys, kNullArrays, kNullArray, kNullStrKey, kWrongKind,
  kUnknownKey, kWrongShape, kWrongDType, kRepeatInInit, kExisting, kSetMismatch, kOutNotListed
};
const char* FaultName(Fault f) {
  static const char* names[] = {"none", "null store", "negative count", "null keys", "null arrays",
                                "null array", "null string key", "wrong key kind", "unknown key",
                                "wrong shape", "wrong dtype", "key repeated in init",
                                "key already initialised", "key sets differ", "output key not broadcast"};
  return names[f];
}

// Applies a fault that any non-empty list can carry; returns its code.
int ApplyListFault(Rng& r, CallList& l, Fault f) {
  const int j = l.keys.empty() ? 0 : r.Int(0, static_cast<int>(l.keys.size()) - 1);
  switch (f) {
    case kNegNum: l.negative = true; l.neg_num = r.Chance(80) ? -r.Int(1, 4) : INT_MIN; return KV_ERR_INVALID_ARGUMENT;
    case kNullKeys: l.null_keys = true; return KV_ERR_NULL_POINTER;
    case kNullArrays: l.null_arrays = true; return KV_ERR_NULL_POINTER;
    case kNullArray: l.arrays[static_cast<size_t>(j)] = nullptr; return KV_ERR_NULL_POINTER;
    case kNullStrKey: l.cnames[static_cast<size_t>(j)] = nullptr; return KV_ERR_NULL_POINTER;
    default: return 0;
  }
}

bool IsListFault(Fault f) { return f >= kNegNum && f <= kNullStrKey; }

const std::vector<std::string> kNamePool = {
    "w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7", "bias", "weight", "", "with space",
    "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87", "tab\tkey", "3", "-1",
    "a_rather_long_parameter_name_of_a_deep_model.layer_17.attention.query_projection.weight"};

KeyRef FreshKey(Rng& r, StoreModel& m, bool is_str, const std::set<KeyRef>& taken) {
  for (;;) {
    KeyRef k;
    k.is_str = is_str;
    if (is_str) k.s = r.Chance(85) ? r.Pick(kNamePool) : "k" + std::to_string(r.Int(0, 1000));
    else k.i = r.Chance(95) ? r.Int(-5, 60) : (r.Chance(50) ? INT_MAX : INT_MIN);
    if (is_str && k.s.empty() && m.dist) continue;  // refused by dist stores (dist_api)
    if (m.Find(is_str, k.i, k.s) == nullptr && taken.count(k) == 0) return k;
  }
}

KeyModel* RandomKey(Rng& r, StoreModel& m) {
  std::vector<KeyModel*> all = m.All();
  return all.empty() ? nullptr : r.Pick(all);
}

int RandomDev(Rng& r) { return r.Chance(60) ? 0 : r.Int(1, 3); }

int CallInit(KVStoreHandle h, const CallList& l) {
  return l.is_str ? KVStoreInitStr(h, l.Num(), l.S(), l.A()) : KVStoreInit(h, l.Num(), l.K(), l.A());
}
int CallPush(KVStoreHandle h, const CallList& l, int prio) {
  return l.is_str ? KVStorePushStr(h, l.Num(), l.S(), l.A(), prio) : KVStorePush(h, l.Num(), l.K(), l.A(), prio);
}
int CallPull(KVStoreHandle h, const CallList& l, int prio) {
  return l.is_str ? KVStorePullStr(h, l.Num(), l.S(), l.A(), prio) : KVStorePull(h, l.Num(), l.K(), l.A(), prio);
}
int CallPushPull(KVStoreHandle h, const CallList& v, const CallList& o, int prio) {
  return v.is_str ? KVStorePushPullStr(h, v.Num(), v.S(), v.A(), o.Num(), o.S(), o.A(), prio)
                  : KVStorePushPull(h, v.Num(), v.K(), v.A(), o.Num(), o.K(), o.A(), prio);
}
int CallBroadcast(KVStoreHandle h, const CallList& v, const CallList& o, int prio) {
  return v.is_str ? KVStoreBroadcastStr(h, v.Num(), v.S(), v.A(), o.Num(), o.S(), o.A(), prio)
                  : KVStoreBroadcast(h, v.Num(), v.K(), v.A(), o.Num(), o.K(), o.A(), prio);
}

// ---------------------------------------------------------------------------------------
// The check after every call

// Pulls every stored key. Keys in `updated` must match the model within the dtype's
// tolerance (or are adopted unchecked when in `unchecked`); every other key must be
// bit-identical to its bytes before the call. The model then adopts what was read.
void Verify(StoreModel& m, const std::set<KeyModel*>& updated, const std::set<KeyModel*>& unchecked) {
  std::vector<KeyModel*> all = m.All();
  if (all.empty()) return;
  CallList l;
  l.is_str = m.kind == 2;
  for (KeyModel* k : all) {
    // A sentinel first, so that a pull that writes nothing cannot pass for one that wrote.
    if (KVArrayFill(k->out, k->dtype == KV_UINT8 ? 251 : -31337) != 0) Violation("KVArrayFill of a check output failed");
    l.Add(RefOf(*k), k->out);
  }
  l.Finish();
  const int rc = CallPull(m.h, l, 0);
  if (rc != 0) Violation("the check's pull of every key failed: %s", KVErrorName(rc));
  ++g_run.verify_pulls;
  for (KeyModel* k : all) {
    const std::string got = ReadBytes(k->out);
    g_run.elements_checked += static_cast<uint64_t>(NumElems(k->shape));
    if (updated.count(k) == 0) {
      if (got != k->bytes) {
        const std::vector<double> g = Decode(k->dtype, got), w = Decode(k->dtype, k->bytes);
        size_t i = 0;
        while (i < g.size() && i < w.size() && std::memcmp(&g[i], &w[i], sizeof(double)) == 0) ++i;
        Violation("key %s %s%s changed without a successful write to it: element %zu is %.9g, was %.9g",
                  k->Display().c_str(), DName(k->dtype), ShapeText(k->shape).c_str(), i,
                  i < g.size() ? g[i] : NAN, i < w.size() ? w[i] : NAN);
      }
      continue;
    }
    const std::vector<double> g = Decode(k->dtype, got);
    if (unchecked.count(k) == 0) {
      for (size_t i = 0; i < g.size(); ++i) {
        if (!Close(k->dtype, k->val[i], g[i])) {
          Violation("key %s %s%s: element %zu is %.9g, the model says %.9g", k->Display().c_str(),
                    DName(k->dtype), ShapeText(k->shape).c_str(), i, g[i], k->val[i]);
        }
      }
    }
    k->bytes = got;
    k->val = g;
  }
}

void VerifyAll(StoreModel& m) { Verify(m, {}, {}); }

void CheckRegs(const StoreModel& m) {
  if (g_live_regs != m.ExpectedRegs()) {
    Violation("%" PRId64 " callback registrations are alive, the store holds %" PRId64
              " (free_fn ran too early, too late or twice)", g_live_regs, m.ExpectedRegs());
  }
}

Fault PickFault(Rng& r, const std::vector<Fault>& options, int clean_percent) {
  return r.Chance(clean_percent) ? kNone : r.Pick(options);
}

KVStoreHandle StoreArg(const StoreModel& m, Fault f) { return f == kNullStore ? nullptr : m.h; }

void AddKeyToModel(StoreModel& m, const KeyRef& ref, KVArrayHandle val, Rng& r) {
  KeyModel k;
  k.is_str = ref.is_str;
  k.name = ref.s;
  k.id = ref.is_str ? m.next_str_id++ : ref.i;
  int ndim = 0;
  int64_t dims[KV_MAX_NDIM];
  KVArrayGetDType(val, &k.dtype);
  KVArrayGetShape(val, dims, KV_MAX_NDIM, &ndim);
  k.shape.assign(dims, dims + ndim);
  k.bytes = ReadBytes(val);
  k.val = Decode(k.dtype, k.bytes);
  k.out = MakeArray(k.dtype, k.shape, RandomDev(r), std::vector<double>(static_cast<size_t>(NumElems(k.shape)), 0));
  if (ref.is_str) m.strs.emplace(ref.s, std::move(k));
  else m.ints.emplace(ref.i, std::move(k));
}

// An array for key `k`, or of another shape or dtype.
KVArrayHandle ArrayFor(Rng& r, Owned& own, int dt, const Shape& s) {
  return own.Add(MakeArray(dt, s, RandomDev(r), GenValues(r, dt, NumElems(s))));
}

std::vector<int> Want(int code) { return code ? std::vector<int>{code} : std::vector<int>{}; }

// ---------------------------------------------------------------------------------------
// Calls

constexpr size_t kMaxKeys = 12;

bool CallKind(Rng& r, const StoreModel& m) { return m.kind ? m.kind == 2 : r.Chance(50); }

void OpInit(Rng& r, StoreModel& m) {
  std::vector<Fault> opts = {kNullStore, kNegNum, kNullKeys, kNullArrays, kNullArray, kRepeatInInit};
  bool is_str = CallKind(r, m);
  if (is_str) opts.push_back(kNullStrKey);
  if (m.kind) opts.push_back(kWrongKind);
  if (m.NumKeys() > 0) opts.push_back(kExisting);
  const Fault f = PickFault(r, opts, 65);
  if (f == kWrongKind) is_str = !is_str;
  int n = r.Int(0, 3);
  if (f == kNone && m.NumKeys() + static_cast<size_t>(n) > kMaxKeys) n = 0;
  if (f != kNone && f != kNegNum && f != kNullStore) n = std::max(n, f == kRepeatInInit ? 2 : 1);
  Owned own;
  CallList l;
  l.is_str = is_str;
  std::set<KeyRef> taken;
  for (int i = 0; i < n; ++i) {
    KeyRef k = FreshKey(r, m, is_str, taken);
    taken.insert(k);
    const int dt = r.Pick(StoreDTypes());
    l.Add(k, ArrayFor(r, own, dt, GenShape(r)));
  }
  int want = 0;
  if (f == kRepeatInInit) {
    l.keys[1] = l.keys[0];
    want = KV_ERR_INVALID_ARGUMENT;
  } else if (f == kExisting) {
    l.keys[static_cast<size_t>(r.Int(0, n - 1))] = RefOf(*RandomKey(r, m));
    want = KV_ERR_DUPLICATE_KEY;
  } else if (f == kWrongKind) {
    want = KV_ERR_KEY_KIND_MISMATCH;
  } else if (f == kNullStore) {
    want = KV_ERR_NULL_POINTER;
  }
  l.Finish();
  if (IsListFault(f)) want = ApplyListFault(r, l, f);
  Note("init %s (%s)", l.Text().c_str(), FaultName(f));
  const int rc = CallInit(StoreArg(m, f), l);
  Expect(rc, Want(want), "init");
  if (rc == 0) {
    for (size_t i = 0; i < l.keys.size(); ++i) AddKeyToModel(m, l.keys[i], l.arrays[i], r);
    if (n > 0) m.kind = is_str ? 2 : 1;
  }
  VerifyAll(m);
}

// Values for existing keys; `f` may make one of them wrong. Returns the fault's code.
int FillValues(Rng& r, StoreModel& m, Owned& own, CallList& l, int n, Fault f, bool is_str) {
  std::set<KeyRef> none;
  for (int i = 0; i < n; ++i) {
    KeyModel* k = RandomKey(r, m);
    l.Add(RefOf(*k), ArrayFor(r, own, k->dtype, k->shape));
  }
  const int j = n ? r.Int(0, n - 1) : 0;
  switch (f) {
    case kWrongKind:
      for (KeyRef& k : l.keys) k = FreshKey(r, m, !is_str, none);
      l.is_str = !is_str;
      return KV_ERR_KEY_KIND_MISMATCH;
    case kUnknownKey:
      l.keys[static_cast<size_t>(j)] = FreshKey(r, m, is_str, none);
      return KV_ERR_UNKNOWN_KEY;
    case kWrongShape: {
      KeyModel* k = m.Find(is_str, l.keys[static_cast<size_t>(j)].i, l.keys[static_cast<size_t>(j)].s);
      l.arrays[static_cast<size_t>(j)] = ArrayFor(r, own, k->dtype, OtherShape(r, k->shape));
      return KV_ERR_SHAPE_MISMATCH;
    }
    case kWrongDType: {
      KeyModel* k = m.Find(is_str, l.keys[static_cast<size_t>(j)].i, l.keys[static_cast<size_t>(j)].s);
      l.arrays[static_cast<size_t>(j)] = ArrayFor(r, own, OtherDType(r, k->dtype), k->shape);
      return KV_ERR_DTYPE_MISMATCH;
    }
    default:
      return 0;
  }
}

std::vector<Fault> DataFaults(const StoreModel& m, bool is_str, bool have_keys) {
  std::vector<Fault> opts = {kNullStore, kNegNum, kUnknownKey};
  if (!have_keys) return opts;
  opts.insert(opts.end(), {kNullKeys, kNullArrays, kNullArray, kWrongShape, kWrongDType});
  if (is_str) opts.push_back(kNullStrKey);
  if (m.kind) opts.push_back(kWrongKind);
  return opts;
}

// The model of the push part of a push or pushpull of list `l` (validated). Returns the
// code the store must return; on success fills the new values of the keys it changes.
struct PushPlan {
  std::vector<KeyModel*> order;
  std::map<KeyModel*, std::vector<double>> sum, out, mom;
  std::set<KeyModel*> unchecked;
};

int ModelPush(StoreModel& m, const CallList& l, PushPlan* p) {
  for (size_t i = 0; i < l.keys.size(); ++i) {
    KeyModel* k = m.Find(l.is_str, l.keys[i].i, l.keys[i].s);
    const std::vector<double> v = Decode(k->dtype, ReadBytes(l.arrays[i]));
    auto it = p->sum.find(k);
    if (it == p->sum.end()) {
      p->order.push_back(k);
      p->sum[k] = v;
    } else {
      for (size_t e = 0; e < v.size(); ++e) it->second[e] += v[e];
    }
  }
  for (KeyModel* k : p->order) {
    std::vector<double>& s = p->sum[k];
    for (double& x : s) x = RoundTo(k->dtype, x);
    bool unchecked = false;
    const int code = ModelUpdate(m, *k, s, &p->out[k], &p->mom[k], &unchecked);
    if (code != 0) return code;
    if (unchecked) p->unchecked.insert(k);
  }
  return 0;
}

void CommitPush(PushPlan& p) {
  for (KeyModel* k : p.order) {
    k->val = p.out[k];
    k->mom = p.mom[k];
  }
}

void OpPush(Rng& r, StoreModel& m) {
  const bool is_str = CallKind(r, m);
  const bool have = m.NumKeys() > 0;
  const Fault f = PickFault(r, DataFaults(m, is_str, have), 65);
  int n = have ? r.Int(0, 4) : 0;
  if (f != kNone && f != kNegNum && f != kNullStore) n = std::max(n, 1);
  Owned own;
  CallList l;
  l.is_str = is_str;
  if (!have && n > 0) {  // only an unknown key can be listed
    l.Add(FreshKey(r, m, is_str, {}), ArrayFor(r, own, r.Pick(StoreDTypes()), GenShape(r)));
  }
  int want = have ? FillValues(r, m, own, l, n, f, is_str) : (n > 0 ? KV_ERR_UNKNOWN_KEY : 0);
  if (f == kNullStore) want = KV_ERR_NULL_POINTER;
  l.Finish();
  if (IsListFault(f)) want = ApplyListFault(r, l, f);
  PushPlan plan;
  if (want == 0) want = ModelPush(m, l, &plan);
  const int prio = r.Int(-2, 2);
  Note("push %s prio %d (%s)", l.Text().c_str(), prio, FaultName(f));
  const int rc = CallPush(StoreArg(m, f), l, prio);
  Expect(rc, Want(want), "push");
  if (rc == 0) {
    CommitPush(plan);
    Verify(m, std::set<KeyModel*>(plan.order.begin(), plan.order.end()), plan.unchecked);
  } else {
    VerifyAll(m);
  }
}

// Sentinel-filled outputs for the keys of `l` (a fault may make one wrong).
std::vector<std::string> Before(const CallList& l) {
  std::vector<std::string> b;
  for (KVArrayHandle a : l.arrays) b.push_back(a ? ReadBytes(a) : std::string());
  return b;
}

// After a call: outputs hold the keys' bytes (success) or what they held before (failure).
void CheckOutputs(StoreModel& m, const CallList& o, const std::vector<std::string>& before, bool ok,
                  const char* what) {
  for (size_t i = 0; i < o.keys.size(); ++i) {
    if (o.arrays[i] == nullptr) continue;
    const std::string got = ReadBytes(o.arrays[i]);
    if (ok) {
      const KeyModel* k = m.Find(o.is_str, o.keys[i].i, o.keys[i].s);
      if (got != k->bytes) Violation("%s output %zu (key %s) differs from the stored value", what, i, k->Display().c_str());
    } else if (got != before[i]) {
      Violation("a failed %s wrote its output %zu", what, i);
    }
  }
}

void OpPull(Rng& r, StoreModel& m) {
  const bool is_str = CallKind(r, m);
  const bool have = m.NumKeys() > 0;
  const Fault f = PickFault(r, DataFaults(m, is_str, have), 70);
  int n = have ? r.Int(0, 4) : 0;
  if (f != kNone && f != kNegNum && f != kNullStore) n = std::max(n, 1);
  Owned own;
  CallList l;
  l.is_str = is_str;
  if (!have && n > 0) l.Add(FreshKey(r, m, is_str, {}), ArrayFor(r, own, r.Pick(StoreDTypes()), GenShape(r)));
  int want = have ? FillValues(r, m, own, l, n, f, is_str) : (n > 0 ? KV_ERR_UNKNOWN_KEY : 0);
  if (f == kNullStore) want = KV_ERR_NULL_POINTER;
  l.Finish();
  if (IsListFault(f)) want = ApplyListFault(r, l, f);
  const std::vector<std::string> before = Before(l);
  Note("pull %s (%s)", l.Text().c_str(), FaultName(f));
  const int rc = CallPull(StoreArg(m, f), l, r.Int(-2, 2));
  Expect(rc, Want(want), "pull");
  VerifyAll(m);
  if (!l.negative && !l.null_keys && !l.null_arrays) CheckOutputs(m, l, before, rc == 0, "pull");
}

void OpPushPull(Rng& r, StoreModel& m) {
  const bool is_str = CallKind(r, m);
  const bool have = m.NumKeys() > 0;
  std::vector<Fault> opts = DataFaults(m, is_str, have);
  if (have) opts.push_back(kSetMismatch);
  const Fault f = PickFault(r, opts, 65);
  const bool on_outputs = r.Chance(50);  // which list carries the fault
  int n = have ? r.Int(0, 4) : 0;
  if (f != kNone && f != kNegNum && f != kNullStore) n = std::max(n, 1);
  Owned own;
  CallList v, o;
  v.is_str = is_str;
  if (!have && n > 0) {
    KeyRef k = FreshKey(r, m, is_str, {});
    const int dt = r.Pick(StoreDTypes());
    const Shape s = GenShape(r);
    v.Add(k, ArrayFor(r, own, dt, s));
    o.Add(k, ArrayFor(r, own, dt, s));
  }
  int want = 0;
  if (have) want = FillValues(r, m, own, v, n, on_outputs ? kNone : f, is_str);
  o.is_str = v.is_str;  // (a wrong-kind fault flips both lists)
  if (have) {
    // Outputs: every distinct pushed key at least once, in random order; some outputs are
    // the pushed arrays themselves.
    std::vector<size_t> first;
    std::set<KeyRef> seen;
    for (size_t i = 0; i < v.keys.size(); ++i) {
      if (seen.insert(v.keys[i]).second) first.push_back(i);
    }
    std::vector<size_t> picks = first;
    for (int extra = r.Int(0, 2); extra > 0 && !first.empty(); --extra) picks.push_back(r.Pick(first));
    for (size_t i = picks.size(); i > 1; --i) std::swap(picks[i - 1], picks[static_cast<size_t>(r.Int(0, static_cast<int>(i) - 1))]);
    for (size_t p : picks) {
      // (a faulty pushed key, unknown or of the other kind, is pulled as the array given)
      const KeyModel* k = m.Find(v.is_str, v.keys[p].i, v.keys[p].s);
      int dt = 0, nd = 0;
      int64_t dims[KV_MAX_NDIM];
      KVArrayGetDType(v.arrays[p], &dt);
      KVArrayGetShape(v.arrays[p], dims, KV_MAX_NDIM, &nd);
      const bool alias = f == kNone && r.Chance(25);
      o.Add(v.keys[p], alias ? v.arrays[p]
                             : k ? ArrayFor(r, own, k->dtype, k->shape) : ArrayFor(r, own, dt, Shape(dims, dims + nd)));
    }
    if (f == kSetMismatch) {
      std::set<KeyRef> vset(v.keys.begin(), v.keys.end());
      KeyModel* other = nullptr;
      for (KeyModel* k : m.All()) {
        if (vset.count(RefOf(*k)) == 0) other = k;
      }
      if (other != nullptr && (vset.size() == 1 || r.Chance(50))) {  // an extra key
        o.Add(RefOf(*other), ArrayFor(r, own, other->dtype, other->shape));
      } else if (vset.size() > 1) {  // a pushed key left out
        const KeyRef drop = v.keys[0];
        CallList kept;
        kept.is_str = is_str;
        for (size_t i = 0; i < o.keys.size(); ++i) {
          if (!(o.keys[i] == drop)) kept.Add(o.keys[i], o.arrays[i]);
        }
        o = kept;
      } else {  // one key and nothing else stored: push it, pull nothing
        o = CallList();
        o.is_str = is_str;
      }
      want = KV_ERR_INVALID_ARGUMENT;
    } else if (on_outputs && f != kNone && f != kNullStore && !IsListFault(f)) {
      const size_t j = static_cast<size_t>(r.Int(0, static_cast<int>(o.keys.size()) - 1));
      KeyModel* k = m.Find(is_str, o.keys[j].i, o.keys[j].s);
      std::set<KeyRef> none;
      switch (f) {
        case kWrongKind:
          for (size_t i = 0; i < v.keys.size(); ++i) v.keys[i] = FreshKey(r, m, !is_str, none);
          for (size_t i = 0; i < o.keys.size(); ++i) o.keys[i] = FreshKey(r, m, !is_str, none);
          v.is_str = o.is_str = !is_str;
          want = KV_ERR_KEY_KIND_MISMATCH;
          break;
        case kUnknownKey: o.keys[j] = FreshKey(r, m, is_str, none); want = KV_ERR_UNKNOWN_KEY; break;
        case kWrongShape: o.arrays[j] = ArrayFor(r, own, k->dtype, OtherShape(r, k->shape)); want = KV_ERR_SHAPE_MISMATCH; break;
        case kWrongDType: o.arrays[j] = ArrayFor(r, own, OtherDType(r, k->dtype), k->shape); want = KV_ERR_DTYPE_MISMATCH; break;
        default: break;
      }
    }
  } else if (n > 0) {
    want = KV_ERR_UNKNOWN_KEY;
  }
  if (f == kNullStore) want = KV_ERR_NULL_POINTER;
  v.Finish();
  o.Finish();
  if (IsListFault(f)) {
    CallList& target = (on_outputs && !o.keys.empty()) ? o : v;
    want = ApplyListFault(r, target, f);
  }
  PushPlan plan;
  if (want == 0) want = ModelPush(m, v, &plan);
  const std::vector<std::string> before = Before(o);
  Note("pushpull %s -> %s (%s%s)", v.Text().c_str(), o.Text().c_str(), FaultName(f),
       f != kNone && on_outputs ? " in outputs" : "");
  const int rc = CallPushPull(StoreArg(m, f), v, o, r.Int(-2, 2));
  Expect(rc, Want(want), "pushpull");
  if (rc == 0) {
    CommitPush(plan);
    Verify(m, std::set<KeyModel*>(plan.order.begin(), plan.order.end()), plan.unchecked);
  } else {
    VerifyAll(m);
  }
  if (!o.negative && !o.null_keys && !o.null_arrays && !v.negative && !v.null_keys && !v.null_arrays) {
    CheckOutputs(m, o, before, rc == 0, "pushpull");
  }
}

void OpBroadcast(Rng& r, StoreModel& m) {
  bool is_str = CallKind(r, m);
  std::vector<Fault> opts = {kNullStore, kNegNum, kNullKeys, kNullArrays, kNullArray, kRepeatInInit};
  opts.insert(opts.end(), {kOutNotListed, kWrongShape, kWrongDType});
  if (is_str) opts.push_back(kNullStrKey);
  if (m.kind) opts.push_back(kWrongKind);
  if (m.NumKeys() > 0) opts.push_back(kExisting);
  const Fault f = PickFault(r, opts, 65);
  if (f == kWrongKind) is_str = !is_str;
  int n = r.Int(0, 3);
  if (f == kNone && m.NumKeys() + static_cast<size_t>(n) > kMaxKeys) n = 0;
  if (f != kNone && f != kNegNum && f != kNullStore) n = std::max(n, f == kRepeatInInit ? 2 : 1);
  Owned own;
  CallList v, o;
  v.is_str = o.is_str = is_str;
  std::set<KeyRef> taken;
  for (int i = 0; i < n; ++i) {
    KeyRef k = FreshKey(r, m, is_str, taken);
    taken.insert(k);
    v.Add(k, ArrayFor(r, own, r.Pick(StoreDTypes()), GenShape(r)));
  }
  int want = 0;
  if (f == kRepeatInInit) {
    v.keys[1] = v.keys[0];
    want = KV_ERR_INVALID_ARGUMENT;
  } else if (f == kExisting) {
    v.keys[static_cast<size_t>(r.Int(0, n - 1))] = RefOf(*RandomKey(r, m));
    want = KV_ERR_DUPLICATE_KEY;
  } else if (f == kWrongKind) {
    want = KV_ERR_KEY_KIND_MISMATCH;
  } else if (f == kNullStore) {
    want = KV_ERR_NULL_POINTER;
  }
  // Outputs: some of the broadcast keys, shaped as the first value given for each.
  const int nout = n ? r.Int(f == kWrongShape || f == kWrongDType ? 1 : 0, n + 1) : 0;
  for (int i = 0; i < nout; ++i) {
    const size_t src = static_cast<size_t>(r.Int(0, n - 1));
    size_t first = src;
    for (size_t j = 0; j < v.keys.size(); ++j) {
      if (v.keys[j] == v.keys[src]) { first = j; break; }
    }
    int dt = 0, nd = 0;
    int64_t dims[KV_MAX_NDIM];
    KVArrayGetDType(v.arrays[first], &dt);
    KVArrayGetShape(v.arrays[first], dims, KV_MAX_NDIM, &nd);
    o.Add(v.keys[src], ArrayFor(r, own, dt, Shape(dims, dims + nd)));
  }
  if (f == kOutNotListed) {
    const KeyRef k = (m.kind != 0 && (m.kind == 2) == is_str && r.Chance(50))
                         ? RefOf(*RandomKey(r, m)) : FreshKey(r, m, is_str, taken);
    o.Add(k, ArrayFor(r, own, r.Pick(StoreDTypes()), GenShape(r)));
    want = KV_ERR_INVALID_ARGUMENT;
  } else if (f == kWrongShape || f == kWrongDType) {
    const size_t j = static_cast<size_t>(r.Int(0, static_cast<int>(o.keys.size()) - 1));
    int dt = 0, nd = 0;
    int64_t dims[KV_MAX_NDIM];
    KVArrayGetDType(o.arrays[j], &dt);
    KVArrayGetShape(o.arrays[j], dims, KV_MAX_NDIM, &nd);
    const Shape s(dims, dims + nd);
    o.arrays[j] = f == kWrongShape ? ArrayFor(r, own, dt, OtherShape(r, s)) : ArrayFor(r, own, OtherDType(r, dt), s);
    want = f == kWrongShape ? KV_ERR_SHAPE_MISMATCH : KV_ERR_DTYPE_MISMATCH;
  }
  v.Finish();
  o.Finish();
  if (IsListFault(f)) {
    CallList& target = (r.Chance(50) && !o.keys.empty()) ? o : v;
    want = ApplyListFault(r, target, f);
  }
  const std::vector<std::string> before = Before(o);
  Note("broadcast %s -> %s (%s)", v.Text().c_str(), o.Text().c_str(), FaultName(f));
  const int rc = CallBroadcast(StoreArg(m, f), v, o, r.Int(-2, 2));
  Expect(rc, Want(want), "broadcast");
  if (rc == 0) {
    for (size_t i = 0; i < v.keys.size(); ++i) AddKeyToModel(m, v.keys[i], v.arrays[i], r);
    if (n > 0) m.kind = is_str ? 2 : 1;
  }
  VerifyAll(m);
  if (!o.negative && !o.null_keys && !o.null_arrays && !v.negative && !v.null_keys && !v.null_arrays) {
    CheckOutputs(m, o, before, rc == 0, "broadcast");
  }
}

void OpSetUpdater(Rng& r, StoreModel& m, bool str) {
  const Fault f = r.Chance(12) ? kNullStore : kNone;
  CbData* d = nullptr;
  if (r.Chance(80)) {
    d = new CbData;
    g_freed.erase(d);
    d->mode = r.Int(0, 1);
    d->scribble = r.Chance(50);
    d->probe = r.Chance(10);
    d->store = m.h;
    for (KeyModel* k : m.All()) {
      if (!r.Chance(25)) continue;
      if (str) d->fail_names.insert(k->name);
      else d->fail_ids.insert(k->id);
    }
    if (str && r.Chance(30)) d->fail_names.insert(r.Pick(kNamePool));
    if (!str && r.Chance(30)) d->fail_ids.insert(r.Int(-5, 60));
    ++g_live_regs;
  }
  std::string fails;
  if (d) {
    for (int id : d->fail_ids) fails += std::to_string(id) + " ";
    for (const std::string& s : d->fail_names) fails += "\"" + s.substr(0, 12) + "\" ";
  }
  Note("set %s updater %s%s%s %s(%s)", str ? "string" : "int",
       d ? (d->mode ? "2*recv" : "stored+recv") : "NULL", d && !fails.empty() ? ", fails on " : "",
       fails.c_str(), d && d->scribble ? "after scribbling " : "", FaultName(f));
  const int rc = str ? KVStoreSetStrUpdater(StoreArg(m, f), d ? StrUpdater : nullptr, d, FreeCb)
                     : KVStoreSetUpdater(StoreArg(m, f), d ? IntUpdater : nullptr, d, FreeCb);
  // A distributed worker runs no updaters: it refuses every registration (NULL included).
  const int want = f == kNullStore ? KV_ERR_NULL_POINTER : m.dist ? KV_ERR_NOT_SUPPORTED : 0;
  Expect(rc, Want(want), str ? "set string updater" : "set updater");
  if (rc != 0) {
    if (d) {  // the caller keeps user_data: free_fn must not have run
      if (g_freed.count(d)) Violation("a refused registration ran free_fn");
      --g_live_regs;
      delete d;
    }
  } else {
    UpdaterModel u;
    if (d) {
      u.kind = UKind::kCallback;
      u.cb = d;
    }
    (str ? m.str_upd : m.upd) = u;
  }
  CheckRegs(m);
  VerifyAll(m);
}

// A valid spec and its model, or a malformed one (*valid false).
std::string GenSpec(Rng& r, UpdaterModel* u, bool* valid) {
  *valid = true;
  auto sp = [&]() { return r.Chance(20) ? std::string(r.Chance(50) ? " " : "\t ") : std::string(); };
  auto num = [&](double x) {
    char buf[40];
    if (r.Chance(15) && x >= 0) std::snprintf(buf, sizeof(buf), "+%g", x);
    else if (r.Chance(15)) std::snprintf(buf, sizeof(buf), "%e", x);
    else std::snprintf(buf, sizeof(buf), "%.17g", x);
    return std::string(buf);
  };
  const int what = r.Int(0, 99);
  if (what < 45) {  // sgd
    u->kind = UKind::kSgd;
    u->lr = 0.01;
    std::vector<std::string> params;
    if (r.Chance(70)) {
      u->lr = r.Pick(std::vector<double>{0.01, 0.1, 0.5, 1.0});
      params.push_back(std::string(r.Chance(50) ? "learning_rate" : "lr") + sp() + "=" + sp() + num(u->lr));
    }
    if (r.Chance(70)) {
      u->momentum = r.Pick(std::vector<double>{0.0, 0.5, 0.9});
      params.push_back("momentum=" + num(u->momentum));
    }
    if (r.Chance(40)) {
      u->wd = r.Pick(std::vector<double>{0.0, 1e-3, 0.1});
      params.push_back("wd=" + num(u->wd));
    }
    if (r.Chance(40)) {
      u->rescale = r.Pick(std::vector<double>{1.0, 0.5, 2.0, -1.0});
      params.push_back("rescale_grad=" + num(u->rescale));
    }
    if (r.Chance(30)) {
      u->clip = r.Pick(std::vector<double>{0.5, 3.0, 100.0});
      params.push_back("clip_gradient=" + num(u->clip));
    }
    for (size_t i = params.size(); i > 1; --i) std::swap(params[i - 1], params[static_cast<size_t>(r.Int(0, static_cast<int>(i) - 1))]);
    std::string s = sp() + r.Pick(std::vector<std::string>{"sgd", "SGD", "Sgd"}) + sp();
    if (!params.empty() || r.Chance(30)) {
      s += "(" + sp();
      for (size_t i = 0; i < params.size(); ++i) s += (i ? "," + sp() : "") + params[i] + sp();
      s += ")" + sp();
    }
    return s;
  }
  if (what < 60) {  // test: w += rescale_grad * g
    u->kind = UKind::kTest;
    if (r.Chance(60)) {
      u->rescale = r.Pick(std::vector<double>{1.0, 0.5, 2.0});
      return "test(rescale_grad=" + num(u->rescale) + ")";
    }
    return "test";
  }
  if (what < 75) {  // optimizers the model does not follow
    u->kind = UKind::kOpaque;
    return r.Pick(std::vector<std::string>{
        "adam", "adam(learning_rate=0.01, beta1=0.5)", "nag(momentum=0.9)", "nag", "adagrad(eps=1e-6)",
        "rmsprop(gamma1=0.5,clip_weights=10)", "rmsprop(rho=0.8)", "NAG(lr=0.1, wd=0.01)"});
  }
  *valid = false;
  if (r.Chance(20)) {  // random bytes after a valid start
    std::string s = "sgd(";
    for (int i = r.Int(0, 12); i > 0; --i) s += static_cast<char>(r.Int(1, 255));
    if (s.back() == ')') s += "x";
    // "sgd(" followed by bytes that happen to parse is possible only with "lr=<num>)" etc.;
    // a stray leading byte that is not an identifier start makes certain it does not.
    s.insert(s.begin() + 4, '#');
    return s;
  }
  return r.Pick(std::vector<std::string>{
      "", "   ", "sgd(", "sgd(lr)", "sgd(lr=)", "sgd(lr=abc)", "sgd(lr=1,,)", "sgd(lr=nan)", "sgd(lr=inf)",
      "sgd(momentum=1.5)", "sgd(momentum=-0.1)", "sgd(lr=-1)", "sgd(bogus=1)", "sgd(lr=0.1,lr=0.2)",
      "sgd(lr=0.1,learning_rate=0.2)", "unknownopt", "sgd() x", "sgd(lr=1e999)", "adam(beta1=1)",
      "adam(epsilon=0)", "1sgd", "sgd(lr=0x10)", "sgd(lr=++1)", "test(lr=1)", "sgd(lr=0.1",
      "#$%", "sgd)(", "sgd(lr=0.1)(", "sgd(=1)", "sgd(lr=1 2)", "rmsprop(gamma1=1)", "adagrad(eps=-1)",
      "sgd(" + std::string(5000, 'x'), std::string(3000, 'a') + "(lr=1)", "s\xc3\xa9gd", "sgd(lr=1e-400x)"});
}

void OpSetOptimizer(Rng& r, StoreModel& m) {
  UpdaterModel u;
  bool valid = true;
  std::string spec = GenSpec(r, &u, &valid);
  const int variant = r.Int(0, 99);
  const Fault f = variant < 6 ? kNullStore : kNone;
  const bool null_spec = variant >= 6 && variant < 12;
  int want = 0;
  if (f == kNullStore || null_spec) want = KV_ERR_NULL_POINTER;
  else if (!valid) want = KV_ERR_INVALID_ARGUMENT;
  Note("set optimizer \"%s\"%s (%s)", spec.substr(0, 60).c_str(), null_spec ? " as NULL" : "", FaultName(f));
  const int rc = KVStoreSetOptimizer(StoreArg(m, f), null_spec ? nullptr : spec.c_str());
  Expect(rc, Want(want), "set optimizer");
  if (rc == 0) {
    m.upd = u;
    for (KeyModel* k : m.All()) {  // a new optimizer starts from zero state
      k->mom.clear();
    }
  }
  CheckRegs(m);
  VerifyAll(m);
}

// Queries and the calls that only distributed stores support.
void OpMisc(Rng& r, StoreModel& m) {
  const int what = r.Int(0, 14);
  const bool null_store = r.Chance(10);
  KVStoreHandle h = null_store ? nullptr : m.h;
  int rc = 0;
  std::vector<int> want = Want(null_store ? KV_ERR_NULL_POINTER : 0);
  switch (what) {
    case 0: {
      const char* t = nullptr;
      Note("get type%s", null_store ? " of NULL" : "");
      rc = KVStoreGetType(h, &t);
      if (rc == 0 && m.type != t) Violation("type is \"%s\", created as \"%s\"", t, m.type.c_str());
      break;
    }
    case 1: {
      int rank = -1, size = -1;
      Note("get rank and group size");
      rc = KVStoreGetRank(h, &rank);
      Expect(rc, want, "get rank");
      rc = KVStoreGetGroupSize(h, &size);
      if (rc == 0 && (rank != 0 || size != 1)) Violation("rank %d of %d in a one-worker store", rank, size);
      break;
    }
    case 2: Note("barrier"); rc = KVStoreBarrier(h); break;
    case 3: Note("wait all"); rc = KVStoreWaitAll(h); break;
    case 4: {
      const int group = r.Int(-1, 8), timeout = r.Int(-2, 5);
      int dead = -7;
      const bool null_out = r.Chance(10);
      Note("num dead node group %d timeout %d%s", group, timeout, null_out ? " out=NULL" : "");
      rc = KVStoreGetNumDeadNode(h, group, timeout, null_out ? nullptr : &dead);
      if (!null_store) {
        if (null_out) want = Want(KV_ERR_NULL_POINTER);
        else if (group < 1 || group > 7 || timeout < 0) want = Want(KV_ERR_INVALID_ARGUMENT);
      }
      // (a job's nodes answer heartbeats every interval: a timeout of 0 s may count them)
      if (rc == 0 && dead != 0 && (!m.dist || timeout >= 3)) Violation("%d dead nodes in a healthy store", dead);
      break;
    }
    case 5:
      Note("set barrier before exit");
      rc = KVStoreSetBarrierBeforeExit(h, r.Int(0, 1));
      if (!null_store && !m.dist) want = Want(KV_ERR_NOT_SUPPORTED);
      break;
    case 6: {
      const int head = r.Int(-3, 3);
      const bool null_body = r.Chance(15);
      Note("send command %d%s", head, null_body ? " body=NULL" : "");
      rc = KVStoreSendCommandToServers(h, head, null_body ? nullptr : "body");
      if (!null_store) {
        if (null_body) want = Want(KV_ERR_NULL_POINTER);
        else if (head < 0) want = Want(KV_ERR_INVALID_ARGUMENT);
        else if (!m.dist) want = Want(KV_ERR_NOT_SUPPORTED);
        else return;  // a server without a controller: its answer is not the model's business
      }
      break;
    }
    case 7:
      if (m.dist) return;
      Note("run server");
      rc = KVStoreRunServer(h, nullptr, nullptr);
      if (!null_store) want = Want(KV_ERR_NOT_SUPPORTED);
      break;
    case 8: {  // creation with bad arguments leaves *out alone
      KVStoreHandle out = reinterpret_cast<KVStoreHandle>(&m);
      const int bad = r.Int(0, 3);
      const char* type = bad == 0 ? nullptr : bad == 1 ? "bogus" : bad == 2 ? "local " : "";
      Note("create store \"%s\"", type ? type : "(NULL)");
      rc = KVStoreCreate(type, &out);
      want = Want(type ? KV_ERR_INVALID_ARGUMENT : KV_ERR_NULL_POINTER);
      if (out != reinterpret_cast<KVStoreHandle>(&m)) Violation("a failed KVStoreCreate set *out");
      break;
    }
    case 9:
      Note("create store with out=NULL");
      rc = KVStoreCreate("local", nullptr);
      want = Want(KV_ERR_NULL_POINTER);
      break;
    case 10:
      Note("free NULL store and array");
      rc = KVStoreFree(nullptr);
      if (rc == 0) rc = KVArrayFree(nullptr);
      want = {};
      break;
    case 11: {
      const int code = r.Int(-40, 5);
      Note("error name %d", code);
      const char* name = KVErrorName(code);
      if (name == nullptr || std::strncmp(name, "KV_", 3) != 0) Violation("KVErrorName(%d) = %s", code, name ? name : "NULL");
      rc = KVHasFeature(r.Int(-2, 5)) >= 0 ? 0 : -1;
      want = {};
      break;
    }
    case 12: {
      const char* t = nullptr;
      Note("get type with out=NULL");
      rc = KVStoreGetType(h, r.Chance(50) ? nullptr : &t);
      if (t == nullptr) want = Want(KV_ERR_NULL_POINTER);
      break;
    }
    case 13: {  // gradient compression: only "none" is ever accepted (the model never compresses)
      static const char* const kParams[][2] = {{"type", "none"}, {"type", "2bit"}, {"type", "3bit"},
                                               {"threshold", "0.5"}, {"type", ""}, {"treshold", "1"},
                                               {"pull", "1"}};  // no type: refused
      const int which = r.Int(0, 6);
      const char* keys[1] = {kParams[which][0]};
      const char* vals[1] = {kParams[which][1]};
      const bool compresses = m.type.find("device") != std::string::npos || m.type.find("dist") != std::string::npos;
      Note("set gradient compression %s=%s", keys[0], vals[0]);
      if (which == 1 && compresses) {  // would change the model's sums: refused by the count instead
        rc = KVStoreSetGradientCompression(h, -1, keys, vals);
        if (!null_store) want = Want(KV_ERR_INVALID_ARGUMENT);
        break;
      }
      rc = KVStoreSetGradientCompression(h, 1, keys, vals);
      if (null_store) break;
      if (which == 0) want = Want(compresses ? 0 : KV_ERR_NOT_SUPPORTED);
      else if (which == 1) want = Want(KV_ERR_NOT_SUPPORTED);
      else want = Want(KV_ERR_INVALID_ARGUMENT);
      break;
    }
    default: {
      int count = -1;
      Note("gpu count");
      rc = KVGetGpuCount(r.Chance(20) ? nullptr : &count);
      want = Want(count == -1 ? KV_ERR_NULL_POINTER : 0);
      break;
    }
  }
  Expect(rc, want, "query");
  VerifyAll(m);
}

// Array calls on a scratch array with its own model.
void OpArray(Rng& r) {
  const int what = r.Int(0, 9);
  if (what <= 2) {  // creation with bad arguments: an error, *out untouched
    KVArrayHandle out = reinterpret_cast<KVArrayHandle>(&g_run);
    int64_t dims[3] = {2, 2, 2};
    int ndim = 3, dtype = r.Pick(kAllDTypes), dev_type = KV_CPU, dev_id = 0;
    int want = KV_ERR_INVALID_ARGUMENT;
    bool null_shape = false, null_out = false;
    switch (r.Int(0, 8)) {
      case 0: ndim = r.Chance(50) ? -1 : KV_MAX_NDIM + 1; break;
      case 1: dims[r.Int(0, 2)] = -r.Int(1, 3); break;
      case 2: dtype = r.Pick(std::vector<int>{-1, 5, 7, 99}); break;
      case 3: dims[0] = dims[1] = dims[2] = INT64_C(1) << 40; break;  // element count overflows
      case 4: dev_type = r.Pick(std::vector<int>{0, 3, -1}); want = KV_ERR_DEVICE; break;
      case 5: dev_id = -1; want = KV_ERR_DEVICE; break;
      case 6: {
        int gpus = 0;
        KVGetGpuCount(&gpus);
        dev_type = KV_GPU;
        dev_id = gpus + r.Int(0, 2);
        want = KV_ERR_DEVICE;
        break;
      }
      case 7: null_shape = true; want = KV_ERR_NULL_POINTER; break;
      default: null_out = true; want = KV_ERR_NULL_POINTER; break;
    }
    Note("array create ndim %d dims %" PRId64 ",%" PRId64 ",%" PRId64 " dtype %d dev %d:%d%s%s", ndim,
         dims[0], dims[1], dims[2], dtype, dev_type, dev_id, null_shape ? " shape=NULL" : "",
         null_out ? " out=NULL" : "");
    const int rc = KVArrayCreate(null_shape ? nullptr : dims, ndim, dtype, dev_type, dev_id, null_out ? nullptr : &out);
    Expect(rc, Want(want), "array create");
    if (out != reinterpret_cast<KVArrayHandle>(&g_run)) Violation("a failed KVArrayCreate set *out");
    return;
  }
  const int dt = r.Pick(kAllDTypes);
  const Shape s = GenShape(r);
  std::vector<double> model = GenValues(r, dt, NumElems(s));
  KVArrayHandle a = MakeArray(dt, s, RandomDev(r), model);
  const std::string before = ReadBytes(a);
  int rc = 0;
  std::vector<int> want;
  bool changes = false;
  switch (what) {
    case 3: {  // fill; integer dtypes refuse values outside their range
      double v = IsInt(dt) ? r.Pick(std::vector<double>{0, 7, 2.75, -3.5, 255, 256, -1, 1e20, NAN, 3e9, -3e9})
                           : r.Int(-40, 40) / 8.0;
      bool ok = true;
      if (IsInt(dt)) {
        const double t = std::trunc(v);
        const double lo = dt == KV_UINT8 ? 0 : dt == KV_INT32 ? -2147483648.0 : -9.2e18;
        const double hi = dt == KV_UINT8 ? 255 : dt == KV_INT32 ? 2147483647.0 : 9.2e18;
        ok = !std::isnan(v) && t >= lo && t <= hi;
        v = t;
      }
      Note("fill %s%s with %g", DName(dt), ShapeText(s).c_str(), v);
      rc = KVArrayFill(a, v);
      if (ok) {
        for (double& x : model) x = RoundTo(dt, v);
        changes = true;
      } else {
        want = Want(KV_ERR_INVALID_ARGUMENT);
      }
      break;
    }
    case 4:
    case 5: {  // a <op> scalar, in place
      const int op = r.Int(0, 3);
      double sc = IsInt(dt) ? r.Int(dt == KV_UINT8 ? 0 : -3, 3) : r.Int(-8, 8) / 4.0;
      if (!IsInt(dt) && op == KV_OP_DIV && sc == 0) sc = 0.5;
      Note("%s%s op %d scalar %g", DName(dt), ShapeText(s).c_str(), op, sc);
      rc = KVArrayBinaryScalar(op, a, sc, a);
      if (IsInt(dt) && op == KV_OP_DIV && sc == 0) {
        want = Want(KV_ERR_INVALID_ARGUMENT);
        break;
      }
      const double s2 = RoundTo(dt, sc);
      for (double& x : model) {
        switch (op) {
          case KV_OP_ADD: x = RoundTo(dt, x + s2); break;
          case KV_OP_SUB: x = RoundTo(dt, x - s2); break;
          case KV_OP_MUL: x = RoundTo(dt, x * s2); break;
          default: x = RoundTo(dt, IsInt(dt) ? std::trunc(x / s2) : x / s2); break;
        }
      }
      changes = true;
      break;
    }
    case 6: {  // a <op> a; integer division refuses a zero divisor and leaves `out` alone
      const int op = r.Chance(10) ? r.Pick(std::vector<int>{-1, 4, 100}) : r.Int(0, 3);
      Note("%s%s op %d with itself", DName(dt), ShapeText(s).c_str(), op);
      rc = KVArrayBinary(op, a, a, a);
      bool zero = false;
      for (double x : model) zero = zero || x == 0;
      if (op < 0 || op > 3 || (IsInt(dt) && op == KV_OP_DIV && zero)) {
        want = Want(KV_ERR_INVALID_ARGUMENT);
        break;
      }
      for (double& x : model) {
        switch (op) {
          case KV_OP_ADD: x = RoundTo(dt, x + x); break;
          case KV_OP_SUB: x = 0; break;
          case KV_OP_MUL: x = RoundTo(dt, x * x); break;
          default: x = x == 0 ? NAN : 1; break;  // floats only reach 0/0 here
        }
      }
      changes = true;
      break;
    }
    case 7: {  // byte counts must match exactly
      const size_t nb = (before.empty() || r.Chance(50)) ? before.size() + static_cast<size_t>(r.Int(1, 8)) : before.size() - 1;
      std::string junk(nb + 1, 'j');
      Note("copy %zu bytes into %s%s (%zu)", nb, DName(dt), ShapeText(s).c_str(), before.size());
      rc = r.Chance(50) ? KVArrayCopyFromHost(a, junk.data(), nb) : KVArrayCopyToHost(a, &junk[0], nb);
      want = Want(KV_ERR_INVALID_ARGUMENT);
      break;
    }
    case 8: {  // shape queries with too little room
      int64_t dims[KV_MAX_NDIM];
      int nd = -1;
      const int cap = static_cast<int>(s.size()) - 1;
      Note("get shape of %s with capacity %d", ShapeText(s).c_str(), cap);
      rc = KVArrayGetShape(a, dims, cap, &nd);
      want = Want(KV_ERR_INVALID_ARGUMENT);
      if (nd != static_cast<int>(s.size())) Violation("a short KVArrayGetShape reported rank %d, not %zu", nd, s.size());
      break;
    }
    default: {  // copies between arrays that differ in shape or dtype
      const bool other_dtype = r.Chance(50);
      const Shape bs = other_dtype ? s : OtherShape(r, s);
      KVArrayHandle b = MakeArray(other_dtype ? OtherDType(r, dt) : dt, bs, 0,
                                  std::vector<double>(static_cast<size_t>(NumElems(bs)), 0));
      Note("copy between %s and a different %s", ShapeText(s).c_str(), other_dtype ? "dtype" : "shape");
      rc = r.Chance(50) ? KVArrayCopy(a, b) : KVArrayCopy(b, a);
      KVArrayFree(b);
      want = Want(other_dtype ? KV_ERR_DTYPE_MISMATCH : KV_ERR_SHAPE_MISMATCH);
      break;
    }
  }
  Expect(rc, want, "array call");
  const std::string after = ReadBytes(a);
  if (!changes || rc != 0) {
    if (after != before) Violation("a failed or read-only array call changed the array");
  } else {
    const std::vector<double> got = Decode(dt, after);
    for (size_t i = 0; i < got.size(); ++i) {
      if (!Close(dt, model[i], got[i])) Violation("array element %zu is %.9g, the model says %.9g", i, got[i], model[i]);
    }
  }
  KVArrayFree(a);
}

// ---------------------------------------------------------------------------------------
// Sessions

struct Options {
  uint64_t seed = 0;
  uint64_t max_calls = 20000;
  double seconds = 0;  // 0: no time bound
  int64_t only_session = -1;
  std::string dist_type;  // --dist TYPE: one session on the job's store
};

const std::vector<std::string> kLocalTypes = {"local", "local_update_cpu", "local_allreduce_cpu", "device",
                                              "local_allreduce_device", "LOCAL", "Device"};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool OutOfBudget(const Options& o, double deadline) {
  return g_run.calls >= o.max_calls || (o.seconds > 0 && Now() >= deadline);
}

void RunSession(const Options& o, uint64_t session, double deadline) {
  g_run.session = session;
  g_run.call_in_session = 0;
  g_run.recent.clear();
  Rng r{Mix(o.seed, session)};
  StoreModel m;
  m.dist = !o.dist_type.empty();
  const std::string type = m.dist ? o.dist_type : r.Pick(kLocalTypes);
  m.type = type;
  for (char& c : m.type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (g_run.trace) std::printf("session %" PRIu64 ": store \"%s\"\n", session, type.c_str());
  int rc = KVStoreCreate(type.c_str(), &m.h);
  if (rc != 0) Violation("KVStoreCreate(\"%s\") failed: %s: %s", type.c_str(), KVErrorName(rc), KVGetLastError());
  const int length = m.dist ? INT_MAX : r.Int(20, 400);
  for (int i = 0; i < length && !OutOfBudget(o, deadline); ++i) {
    ++g_run.call_in_session;
    ++g_run.calls;
    const int op = r.Int(0, 99);
    if (op < 14) OpInit(r, m);
    else if (op < 36) OpPush(r, m);
    else if (op < 48) OpPull(r, m);
    else if (op < 60) OpPushPull(r, m);
    else if (op < 68) OpBroadcast(r, m);
    else if (op < 74) OpSetUpdater(r, m, false);
    else if (op < 78) OpSetUpdater(r, m, true);
    else if (op < 86) OpSetOptimizer(r, m);
    else if (op < 93) OpMisc(r, m);
    else OpArray(r);
  }
  for (KeyModel* k : m.All()) KVArrayFree(k->out);
  Note("free store");
  rc = KVStoreFree(m.h);
  if (rc != 0) Violation("KVStoreFree failed: %s: %s", KVErrorName(rc), KVGetLastError());
  if (g_live_regs != 0) Violation("%" PRId64 " callback registrations outlived their store", g_live_regs);
  ++g_run.sessions;
  if (m.dist) std::printf("PASS fuzz_capi --dist %s\n", type.c_str());
}

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: fuzz_capi [--seed N] [--calls N] [--seconds S] [--session K] [--trace]\n"
               "                 [--dist TYPE]\n"
               "  Random C ABI calls against a shadow model; stops after N calls (default 20000)\n"
               "  or S seconds, whichever comes first. --session K replays one session of the seed.\n"
               "  --dist TYPE runs one session on a distributed store (inside kvstore-launch).\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) Usage();
      return argv[++i];
    };
    if (a == "--seed") o.seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--calls") o.max_calls = std::strtoull(next(), nullptr, 10);
    else if (a == "--seconds") o.seconds = std::atof(next());
    else if (a == "--session") o.only_session = std::atoll(next());
    else if (a == "--dist") o.dist_type = next();
    else if (a == "--trace") g_run.trace = true;
    else Usage();
  }
  g_run.seed = o.seed;
  if (std::strcmp(KVErrorName(-19), "KV_ERR_BUSY") == 0) g_busy_code = -19;
  std::printf("fuzz_capi: seed %" PRIu64 ", up to %" PRIu64 " calls%s%s\n", o.seed, o.max_calls,
              o.seconds > 0 ? ", time-bounded" : "", o.dist_type.empty() ? "" : (", store " + o.dist_type).c_str());
  std::fflush(stdout);
  const double start = Now(), deadline = start + o.seconds;
  if (o.only_session >= 0) {
    RunSession(o, static_cast<uint64_t>(o.only_session), deadline);
  } else if (!o.dist_type.empty()) {
    RunSession(o, 0, deadline);
  } else {
    for (uint64_t s = 0; !OutOfBudget(o, deadline); ++s) RunSession(o, s, deadline);
  }
  std::printf("fuzz_capi: seed %" PRIu64 ": %" PRIu64 " calls (%" PRIu64 " failed as the model said), %" PRIu64
              " sessions, %" PRIu64 " updater runs, %" PRIu64 " check pulls (%" PRIu64
              " elements compared) in %.1f s; 0 violations\n",
              o.seed, g_run.calls, g_run.calls_failed, g_run.sessions, g_run.updater_runs, g_run.verify_pulls,
              g_run.elements_checked, Now() - start);
  return 0;
}
