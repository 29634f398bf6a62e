// profile_call.h - the profiler's view of the C ABI's data calls (core/profile.h): one span
// per call on the calling thread ("push", "pull", "pushpull" with the call's bytes), and
// each key's push and pull counters with the bytes of its arrays, counted when the call
// succeeds. While the profiler is off a ProfiledCall is one relaxed load and a branch.
#pragma once

#include <exception>

#include "c_api/call_arrays.h"
#include "core/profile.h"

namespace kvstore {
namespace capi {

class ProfiledCall {
 public:
  // `outs` (may be null): the outputs of a pushpull, counted as pulls of their keys.
  ProfiledCall(const char* name, profile::Stat stat, const KeyList& keys, const CallArrays& arrays,
               const KeyList* out_keys = nullptr, const CallArrays* outs = nullptr)
      : on_(profile::On()) {
    if (!on_) return;
    name_ = name;
    stat_ = stat;
    keys_ = &keys;
    arrays_ = &arrays;
    out_keys_ = out_keys;
    outs_ = outs;
    exceptions_ = std::uncaught_exceptions();
    start_ = profile::NowNs();
  }
  ~ProfiledCall() {
    if (on_) Finish();
  }
  ProfiledCall(const ProfiledCall&) = delete;
  ProfiledCall& operator=(const ProfiledCall&) = delete;

 private:
  void Finish();
  const bool on_;
  const char* name_ = nullptr;
  profile::Stat stat_ = profile::Stat::kNone;
  const KeyList* keys_ = nullptr;
  const CallArrays* arrays_ = nullptr;
  const KeyList* out_keys_ = nullptr;
  const CallArrays* outs_ = nullptr;
  int exceptions_ = 0;
  int64_t start_ = 0;
};

}  // namespace capi
}  // namespace kvstore
