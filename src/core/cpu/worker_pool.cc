#include "core/cpu/worker_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

namespace kvstore {
namespace {

long EnvLong(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(v, &end, 10);
  return (end && *end == '\0' && parsed >= 0) ? parsed : fallback;
}

}  // namespace

WorkerPool& WorkerPool::Instance() {
  // Leaked on purpose: worker threads must outlive every static destructor that might still
  // run a kernel at exit.
  static WorkerPool* pool = new WorkerPool(
      static_cast<int>(EnvLong("KVSTORE_CPU_THREADS",
                               std::max(1u, std::thread::hardware_concurrency()))),
      static_cast<size_t>(EnvLong("KVSTORE_CPU_PARALLEL_MIN_BYTES", 4L << 20)),
      static_cast<int>(EnvLong("KVSTORE_CPU_SPIN_US", 50)));
  return *pool;
}

WorkerPool::WorkerPool(int width, size_t parallel_min_bytes, int spin_us)
    : parallel_min_bytes_(parallel_min_bytes), spin_us_(spin_us) {
  for (int i = 1; i < std::min(width, 256); ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true, std::memory_order_release);
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

template <typename Pred>
bool WorkerPool::SpinUntil(Pred pred) const {
  if (spin_us_ <= 0) return pred();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
  for (int i = 0;; ++i) {
    if (pred()) return true;
    _mm_pause();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return pred();
  }
}

// Claims and runs tasks of the current job until none is left. Called with mu_ unlocked.
void WorkerPool::RunTasks() {
  std::unique_lock<std::mutex> lock(mu_);
  while (task_ && next_task_ < num_tasks_) {
    const int i = next_task_++;
    const std::function<void(int)>* task = task_;
    lock.unlock();
    (*task)(i);
    lock.lock();
    if (unfinished_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_cv_.notify_all();
  }
}

void WorkerPool::WorkerLoop() {
  uint64_t seen = 0;
  auto ready = [&] { return stopping_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; };
  for (;;) {
    if (!SpinUntil(ready)) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, ready);
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    RunTasks();
  }
}

void WorkerPool::ParallelFor(int num_tasks, const std::function<void(int)>& task) {
  std::unique_lock<std::mutex> owner(job_owner_mu_, std::try_to_lock);
  if (num_tasks <= 1 || threads_.empty() || !owner.owns_lock()) {
    for (int i = 0; i < num_tasks; ++i) task(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = &task;
    num_tasks_ = num_tasks;
    next_task_ = 0;
    unfinished_.store(num_tasks, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  work_cv_.notify_all();
  RunTasks();
  auto done = [&] { return unfinished_.load(std::memory_order_acquire) == 0; };
  SpinUntil(done);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, done);
  task_ = nullptr;
}

}  // namespace kvstore
