#include "store/callback_updater.h"

namespace kvstore {
namespace {

thread_local const void* tls_updating_store = nullptr;

class IntCallbackUpdater final : public CallbackUpdater {
 public:
  IntCallbackUpdater(KVUpdater fn, void* user_data, KVFreeFn free_fn) : CallbackUpdater(user_data, free_fn), fn_(fn) {}
  void Update(int key, const char* str_key, Array* recv, Array* stored, UpdateTxn*) override {
    const int rc = fn_(key, recv, stored, user_data());
    if (rc != 0) {
      if (str_key) {
        KV_FAIL(KV_ERR_CALLBACK, "updater returned %d for key \"%s\" (id %d); stored value unchanged", rc, str_key, key);
      }
      KV_FAIL(KV_ERR_CALLBACK, "updater returned %d for key %d; stored value unchanged", rc, key);
    }
  }

 private:
  KVUpdater fn_;
};

class StrCallbackUpdater final : public CallbackUpdater {
 public:
  StrCallbackUpdater(KVStrUpdater fn, void* user_data, KVFreeFn free_fn)
      : CallbackUpdater(user_data, free_fn), fn_(fn) {}
  void Update(int key, const char* str_key, Array* recv, Array* stored, UpdateTxn*) override {
    const std::string name = str_key ? std::string(str_key) : std::to_string(key);
    const int rc = fn_(name.c_str(), recv, stored, user_data());
    KV_CHECK(rc == 0, KV_ERR_CALLBACK, "string updater returned %d for key \"%s\"; stored value unchanged", rc,
             name.c_str());
  }

 private:
  KVStrUpdater fn_;
};

}  // namespace

CallbackUpdater::~CallbackUpdater() {
  if (free_fn_) free_fn_(user_data_);
}

std::shared_ptr<CallbackUpdater> MakeCallbackUpdater(KVUpdater fn, void* user_data, KVFreeFn free_fn) {
  return std::make_shared<IntCallbackUpdater>(fn, user_data, free_fn);
}

std::shared_ptr<CallbackUpdater> MakeStrCallbackUpdater(KVStrUpdater fn, void* user_data, KVFreeFn free_fn) {
  return std::make_shared<StrCallbackUpdater>(fn, user_data, free_fn);
}

UpdaterScope::UpdaterScope(const void* store) : previous_(tls_updating_store) { tls_updating_store = store; }
UpdaterScope::~UpdaterScope() { tls_updating_store = previous_; }
bool UpdaterScope::Active(const void* store) { return store != nullptr && tls_updating_store == store; }

}  // namespace kvstore
