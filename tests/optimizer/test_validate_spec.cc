// test_validate_spec.cc - OptimizerSpec (optimizer/optimizer.h) against
// CreateOptimizer: for every spec, good or bad, the two must agree: both succeed, or both
// throw kvstore::Error with the same code and the same message, and a good spec's
// CheckDType refuses exactly the dtypes the optimizer refuses. A distributed worker
// validates a spec with it before shipping it to the servers, which create the optimizer.
//
// Usage: test_validate_spec   (white-box: links kvstore_internal)
#include <memory>
#include <string>

#include "../common/check.h"
#include "core/error.h"
#include "kvstore/kvstore.h"
#include "optimizer/optimizer.h"

namespace {

// What a call did: threw (with its code and message) or not.
struct Outcome {
  bool threw = false;
  int code = 0;
  std::string message;
};

template <typename Fn>
Outcome Run(Fn fn) {
  Outcome out;
  try {
    fn();
  } catch (const kvstore::Error& e) {
    out.threw = true;
    out.code = e.code();
    out.message = e.what();
  }
  return out;
}

// Validates `spec` and creates an optimizer from it; checks that the two agree and that
// the outcome is `code` (0: success) with a message containing `needle`.
void CheckSpec(const std::string& spec, int code, const char* needle) {
  const Outcome validated = Run([&] { (void)kvstore::OptimizerSpec{spec}; });
  const Outcome created = Run([&] { (void)kvstore::CreateOptimizer(spec); });
  CHECK_MSG(validated.threw == created.threw && validated.code == created.code &&
                validated.message == created.message,
            "spec \"%s\": OptimizerSpec gave %d \"%s\", CreateOptimizer %d \"%s\"",
            spec.c_str(), validated.code, validated.message.c_str(), created.code,
            created.message.c_str());
  CHECK_MSG(validated.threw == (code != 0) && validated.code == code &&
                validated.message.find(needle) != std::string::npos,
            "spec \"%s\": got %d \"%s\", want %d containing \"%s\"", spec.c_str(),
            validated.code, validated.message.c_str(), code, needle);
  if (validated.threw || created.threw) return;
  // The dtypes the checked spec lets through are those the optimizer would update.
  const kvstore::OptimizerSpec checked(spec);
  const std::shared_ptr<kvstore::Updater> optimizer = kvstore::CreateOptimizer(spec);
  // And both say alike how row_sparse sums are applied (lazily or densely).
  CHECK_MSG(checked.row_sparse_recv() == optimizer->row_sparse_recv(),
            "spec \"%s\": OptimizerSpec and the optimizer disagree on row_sparse_recv", spec.c_str());
  for (int dtype : {KV_FLOAT32, KV_FLOAT64, KV_FLOAT16, KV_UINT8, KV_INT32, KV_INT64}) {
    const Outcome by_spec = Run([&] { checked.CheckDType(dtype, "7"); });
    const Outcome by_optimizer = Run([&] { optimizer->CheckDType(dtype, "7"); });
    CHECK_MSG(by_spec.threw == by_optimizer.threw && by_spec.code == by_optimizer.code &&
                  by_spec.message == by_optimizer.message,
              "spec \"%s\", dtype %d: OptimizerSpec::CheckDType gave %d \"%s\", the optimizer %d \"%s\"",
              spec.c_str(), dtype, by_spec.code, by_spec.message.c_str(), by_optimizer.code,
              by_optimizer.message.c_str());
  }
}

}  // namespace

int main() {
  // Good specs: nothing thrown.
  CheckSpec("sgd", 0, "");
  CheckSpec("  SGD ( lr = 0.5 , momentum=0.9 )  ", 0, "");
  CheckSpec("adam(beta1=0,beta2=0.5,epsilon=1E-3)", 0, "");
  CheckSpec("rmsprop(centered=1,rho=0.8,clip_weights=2)", 0, "");
  CheckSpec("adagrad(clip_gradient=0)", 0, "");
  CheckSpec("test(rescale_grad=-2)", 0, "");
  CheckSpec("test", 0, "");  // the one that updates integers
  CheckSpec("sgd(lr=0.1,multi_precision=1)", 0, "");
  CheckSpec("test(multi_precision=1)", 0, "");  // still updates integers
  CheckSpec("sgd(lazy_update=0)", 0, "");
  CheckSpec("adam(lazy_update=1,multi_precision=1)", 0, "");
  CheckSpec("sgd(lazy_update=0.5)", KV_ERR_INVALID_ARGUMENT, "must be 0 or 1");
  CheckSpec("nag(lazy_update=1)", KV_ERR_INVALID_ARGUMENT, "optimizer nag has no parameter \"lazy_update\"");
  // Unknown optimizer.
  CheckSpec("foo(lr=1)", KV_ERR_INVALID_ARGUMENT, "unknown optimizer \"foo\"");
  CheckSpec("foo", KV_ERR_INVALID_ARGUMENT, "sgd, nag, adam, adagrad, rmsprop, test");
  // Unknown or repeated parameter.
  CheckSpec("sgd(beta1=0.9)", KV_ERR_INVALID_ARGUMENT, "optimizer sgd has no parameter \"beta1\"");
  CheckSpec("test(lr=1)", KV_ERR_INVALID_ARGUMENT, "valid parameters: rescale_grad");
  CheckSpec("sgd(lr=0.1,learning_rate=0.2)", KV_ERR_INVALID_ARGUMENT,
            "given twice (as \"lr\" and \"learning_rate\")");
  // Values outside their range.
  CheckSpec("sgd(lr=-1)", KV_ERR_INVALID_ARGUMENT, "\"learning_rate\" of optimizer sgd must be >= 0");
  CheckSpec("adam(beta1=1)", KV_ERR_INVALID_ARGUMENT, "must be in [0, 1)");
  CheckSpec("rmsprop(centered=0.5)", KV_ERR_INVALID_ARGUMENT, "must be 0 or 1");
  CheckSpec("adagrad(clip_gradient=-1)", KV_ERR_INVALID_ARGUMENT, "clip_gradient");
  CheckSpec("nag(multi_precision=3)", KV_ERR_INVALID_ARGUMENT,
            "\"multi_precision\" of optimizer nag must be 0 or 1, got 3");
  // Syntax errors and values that are not finite numbers.
  CheckSpec("sgd(lr=abc)", KV_ERR_INVALID_ARGUMENT, "\"abc\" of 'lr' is not a finite number");
  CheckSpec("sgd(lr=nan)", KV_ERR_INVALID_ARGUMENT, "nan");
  CheckSpec("sgd(lr=0.1", KV_ERR_INVALID_ARGUMENT, "expected ',' or ')'");
  CheckSpec("", KV_ERR_INVALID_ARGUMENT, "expected an optimizer name");
  CheckSpec(std::string(1000, 'x'), KV_ERR_INVALID_ARGUMENT, "... (1000 bytes)");
  // The summed gradient's dtype (Updater::RecvDType): float32 for float16 weights under
  // multi_precision, the weight's own dtype otherwise.
  for (const char* name : {"sgd", "nag", "adam", "adagrad", "rmsprop", "test"}) {
    for (int mp : {0, 1}) {
      const std::string spec = std::string(name) + "(multi_precision=" + std::to_string(mp) + ")";
      const std::shared_ptr<kvstore::Updater> optimizer = kvstore::CreateOptimizer(spec);
      for (int dtype : {KV_FLOAT32, KV_FLOAT64, KV_FLOAT16, KV_UINT8, KV_INT32, KV_INT64}) {
        const int want = mp == 1 && dtype == KV_FLOAT16 ? KV_FLOAT32 : dtype;
        CHECK_MSG(optimizer->RecvDType(dtype) == want, "%s: RecvDType(%d) is %d, want %d",
                  spec.c_str(), dtype, optimizer->RecvDType(dtype), want);
      }
    }
  }
  return check_summary();
}
