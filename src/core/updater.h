// updater.h - the merge step of a push: stored <- f(key, recv, stored).
#pragma once

#include <memory>
#include <string>

#include "core/array.h"

namespace kvstore {

class Updater {
 public:
  virtual ~Updater() = default;
  // Merges `recv` into `stored` in place. `str_key` is the string key or nullptr for int
  // keys; `key` is the int key or the internal id of the string key. Throws kvstore::Error
  // on failure; `stored` may then be partly written, so callers run it on a scratch copy.
  virtual void Update(int key, const char* str_key, Array* recv, Array* stored) = 0;
};

// Wraps a C callback registration; the destructor runs free_fn(user_data) exactly once.
std::shared_ptr<Updater> MakeCallbackUpdater(KVUpdater fn, void* user_data, KVFreeFn free_fn);
std::shared_ptr<Updater> MakeStrCallbackUpdater(KVStrUpdater fn, void* user_data,
                                                KVFreeFn free_fn);

// Thread-local marker of "an updater of this store is running on this thread"; store data
// calls made from inside an updater are rejected to avoid self-deadlock.
class UpdaterScope {
 public:
  explicit UpdaterScope(const void* store);
  ~UpdaterScope();
  static bool Active(const void* store);

 private:
  const void* previous_;
};

}  // namespace kvstore
