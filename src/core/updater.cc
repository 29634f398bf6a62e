#include "core/updater.h"

namespace kvstore {
namespace {

thread_local const void* tls_updating_store = nullptr;

// Owns one C callback registration; free_fn runs exactly once, in the destructor, which the
// shared_ptr delays until no push still holds the registration.
class CallbackRegistration {
 public:
  CallbackRegistration(void* user_data, KVFreeFn free_fn) : user_data_(user_data), free_fn_(free_fn) {}
  ~CallbackRegistration() {
    if (free_fn_) free_fn_(user_data_);
  }
  CallbackRegistration(const CallbackRegistration&) = delete;
  CallbackRegistration& operator=(const CallbackRegistration&) = delete;
  void* user_data() const { return user_data_; }

 private:
  void* user_data_;
  KVFreeFn free_fn_;
};

class IntCallbackUpdater final : public Updater {
 public:
  IntCallbackUpdater(KVUpdater fn, void* user_data, KVFreeFn free_fn) : fn_(fn), reg_(user_data, free_fn) {}
  void Update(int key, const char* str_key, Array* recv, Array* stored) override {
    const int rc = fn_(key, recv, stored, reg_.user_data());
    if (rc != 0) {
      if (str_key) {
        KV_FAIL(KV_ERR_CALLBACK, "updater returned %d for key \"%s\" (id %d); stored value unchanged", rc, str_key, key);
      }
      KV_FAIL(KV_ERR_CALLBACK, "updater returned %d for key %d; stored value unchanged", rc, key);
    }
  }

 private:
  KVUpdater fn_;
  CallbackRegistration reg_;
};

class StrCallbackUpdater final : public Updater {
 public:
  StrCallbackUpdater(KVStrUpdater fn, void* user_data, KVFreeFn free_fn) : fn_(fn), reg_(user_data, free_fn) {}
  void Update(int key, const char* str_key, Array* recv, Array* stored) override {
    const std::string name = str_key ? std::string(str_key) : std::to_string(key);
    const int rc = fn_(name.c_str(), recv, stored, reg_.user_data());
    KV_CHECK(rc == 0, KV_ERR_CALLBACK, "string updater returned %d for key \"%s\"; stored value unchanged", rc,
             name.c_str());
  }

 private:
  KVStrUpdater fn_;
  CallbackRegistration reg_;
};

}  // namespace

std::shared_ptr<Updater> MakeCallbackUpdater(KVUpdater fn, void* user_data, KVFreeFn free_fn) {
  return std::make_shared<IntCallbackUpdater>(fn, user_data, free_fn);
}

std::shared_ptr<Updater> MakeStrCallbackUpdater(KVStrUpdater fn, void* user_data, KVFreeFn free_fn) {
  return std::make_shared<StrCallbackUpdater>(fn, user_data, free_fn);
}

UpdaterScope::UpdaterScope(const void* store) : previous_(tls_updating_store) { tls_updating_store = store; }
UpdaterScope::~UpdaterScope() { tls_updating_store = previous_; }
bool UpdaterScope::Active(const void* store) { return store != nullptr && tls_updating_store == store; }

}  // namespace kvstore
