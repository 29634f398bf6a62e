#include "store/callback_updater.h"

namespace kvstore {
namespace {

thread_local const UpdaterScope* tls_updater_scope = nullptr;  // innermost

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

UpdaterScope::UpdaterScope(const void* store) : store_(store), outer_(tls_updater_scope) { tls_updater_scope = this; }
UpdaterScope::~UpdaterScope() { tls_updater_scope = outer_; }
bool UpdaterScope::Active(const void* store) {
  if (store == nullptr) return false;
  for (const UpdaterScope* s = tls_updater_scope; s != nullptr; s = s->outer_) {
    if (s->store_ == store) return true;
  }
  return false;
}

}  // namespace kvstore
