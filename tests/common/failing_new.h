/* failing_new.h - makes the program's allocations fail on request, for tests of what a call
 * leaves behind when it runs out of memory.
 *
 * Including this header REPLACES the program's global operator new and delete (all the
 * plain, array and nothrow forms, so that every pair matches, also under AddressSanitizer)
 * with malloc and free; the library, linked statically or as a shared object, resolves to
 * them too. Include it in exactly one source file of a test program.
 *
 *   FailNthAllocation(n)   the n-th allocation from now on (1 = the next) fails: the throwing
 *                          forms throw std::bad_alloc, the nothrow forms return null
 *   StopFailingAllocations()
 *
 * Allocations on every thread count, so arm it only around a call that runs on the calling
 * thread. C++ only. */
#ifndef KVSTORE_TESTS_COMMON_FAILING_NEW_H_
#define KVSTORE_TESTS_COMMON_FAILING_NEW_H_

#include <atomic>
#include <cstdlib>
#include <new>

namespace failing_new {

inline std::atomic<long> allocations{0};
inline std::atomic<long> fail_at{0};  // 0: never; n: the n-th allocation after arming fails

// One allocation: null when it is the one to fail.
inline void* Allocate(std::size_t n) {
  const long at = fail_at.load(std::memory_order_relaxed);
  if (at != 0 && allocations.fetch_add(1, std::memory_order_relaxed) + 1 == at) return nullptr;
  return std::malloc(n ? n : 1);
}

inline void* AllocateOrThrow(std::size_t n) {
  void* p = Allocate(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace failing_new

inline void FailNthAllocation(long n) {
  failing_new::allocations.store(0);
  failing_new::fail_at.store(n);
}

inline void StopFailingAllocations() { failing_new::fail_at.store(0); }

// GCC takes the free() of memory from a replaced operator new for a mismatch.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) { return failing_new::AllocateOrThrow(n); }
void* operator new[](std::size_t n) { return failing_new::AllocateOrThrow(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return failing_new::Allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return failing_new::Allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

#endif  // KVSTORE_TESTS_COMMON_FAILING_NEW_H_
