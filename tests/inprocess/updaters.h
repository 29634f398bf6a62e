// updaters.h - server-side updaters for in-process tests: they apply stored += recv and
// record every call, so that a test can count rounds and see what each one received.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "optimizer/updater.h"

namespace kvstore {
namespace inprocess {

// float32 values only. Runs on a server thread; tests read calls() from theirs.
class RecordingUpdater : public Updater {
 public:
  struct Call {
    int key;              // int key, or the server-local id of a string key
    std::string str_key;  // "" for int keys
    std::vector<float> recv;
  };

  // `fail(call)` may throw to fail the update (after it was recorded); the stored value is
  // then left as it was, as the server runs the updater on a scratch copy.
  explicit RecordingUpdater(std::function<void(const Call&, int index)> fail = nullptr)
      : fail_(std::move(fail)) {}

  void Update(int key, const char* str_key, Array* recv, Array* stored, UpdateTxn*) override {
    Call c;
    c.key = key;
    c.str_key = str_key != nullptr ? str_key : "";
    const auto* r = static_cast<const float*>(recv->data());
    c.recv.assign(r, r + recv->size());
    int index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index = static_cast<int>(calls_.size());
      calls_.push_back(c);
    }
    if (fail_) fail_(c, index);
    auto* s = static_cast<float*>(stored->data());
    for (int64_t i = 0; i < stored->size(); ++i) s[i] += r[i];
  }

  std::vector<Call> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // The calls for int key `key`.
  std::vector<Call> calls_of(int key) const {
    std::vector<Call> out;
    for (const Call& c : calls()) {
      if (c.str_key.empty() && c.key == key) out.push_back(c);
    }
    return out;
  }

 private:
  std::function<void(const Call&, int)> fail_;
  mutable std::mutex mu_;
  std::vector<Call> calls_;
};

}  // namespace inprocess
}  // namespace kvstore
