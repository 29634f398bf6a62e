// callback_updater.h - updaters registered through the C ABI (KVStoreSetUpdater and its
// string twin), and the marker that keeps an updater from calling back into its own store.
#pragma once

#include <memory>

#include "kvstore/kvstore.h"
#include "optimizer/updater.h"

namespace kvstore {

// A C callback registration (KVStoreSetUpdater and its string twin). It owns user_data from
// construction: the destructor runs free_fn(user_data) exactly once, when the last push
// holding the registration lets go of it. A registration the store refused is disowned
// before it is dropped, because the header leaves user_data with the caller on failure.
class CallbackUpdater : public Updater {
 public:
  CallbackUpdater(void* user_data, KVFreeFn free_fn) : user_data_(user_data), free_fn_(free_fn) {}
  ~CallbackUpdater() override;
  CallbackUpdater(const CallbackUpdater&) = delete;
  CallbackUpdater& operator=(const CallbackUpdater&) = delete;
  // Hands user_data back to the caller: free_fn will not run.
  void Disown() { free_fn_ = nullptr; }

 protected:
  void* user_data() const { return user_data_; }

 private:
  void* user_data_;
  KVFreeFn free_fn_;
};

std::shared_ptr<CallbackUpdater> MakeCallbackUpdater(KVUpdater fn, void* user_data, KVFreeFn free_fn);
std::shared_ptr<CallbackUpdater> MakeStrCallbackUpdater(KVStrUpdater fn, void* user_data,
                                                        KVFreeFn free_fn);

// Thread-local marker of "an updater of this store is running on this thread"; store data
// calls made from inside an updater are rejected to avoid self-deadlock. Scopes nest (an
// updater of store A may push to store B, whose updater runs in a scope of its own), and
// Active looks at the whole chain: B's updater calling A again still holds A's key locks.
class UpdaterScope {
 public:
  explicit UpdaterScope(const void* store);
  ~UpdaterScope();
  static bool Active(const void* store);

 private:
  const void* store_;
  const UpdaterScope* outer_;
};

}  // namespace kvstore
