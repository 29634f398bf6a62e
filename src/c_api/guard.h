// guard.h - what every shim of the C ABI runs through: Guard turns whatever the library
// throws into a KV_ERR_* code and the calling thread's last-error message (nothing thrown
// crosses the ABI), and EnterStore/EnterArray check a handle argument and hold it in use
// for the rest of the call, so that freeing it meanwhile (from another thread, or from the
// store's own callback) is refused with KV_ERR_BUSY.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "core/call_gate.h"
#include "core/error.h"
#include "store/store.h"
#include "kvstore/kvstore.h"

namespace kvstore {
namespace capi {

// The calling thread's message of its most recent failed call (KVGetLastError).
inline std::string& LastError() {
  thread_local std::string message;
  return message;
}

inline int SetLastError(int code, const char* message) {
  LastError().assign(message);
  return code;
}

// Runs `body` and maps what it throws onto the error table.
template <typename Body>
int Guard(Body&& body) noexcept {
  try {
    body();
    return KV_OK;
  } catch (const Error& e) {
    return SetLastError(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return SetLastError(KV_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return SetLastError(KV_ERR_INTERNAL, e.what());
  } catch (...) {
    return SetLastError(KV_ERR_INTERNAL, "unknown internal error");
  }
}

#define KV_REQUIRE(ptr, name) KV_CHECK((ptr) != nullptr, KV_ERR_NULL_POINTER, "%s is NULL", name)

using InCall = CallGate::Scope;

inline InCall EnterStore(KVStoreHandle store) {
  KV_REQUIRE(store, "store");
  return InCall(store->call_gate(), "store");
}
inline InCall EnterArray(KVArrayHandle array, const char* name) {
  KV_REQUIRE(array, name);
  return InCall(array->call_gate(), name);
}

}  // namespace capi
}  // namespace kvstore
