// worker_pool.h - the process-wide pool of CPU worker threads used by the large-array
// kernels (reduction, copy). Small arrays never reach it: a hand-off to a sleeping thread
// costs tens of microseconds on small VMs, more than the work itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvstore {

class WorkerPool {
 public:
  // The shared pool; KVSTORE_CPU_THREADS (default: hardware threads) sets its total width,
  // the calling thread included.
  static WorkerPool& Instance();
  ~WorkerPool();

  int width() const { return static_cast<int>(threads_.size()) + 1; }

  // Runs task(i) for every i in [0, num_tasks), on the pool and the calling thread, and
  // returns when all have finished. Tasks must not throw. When another thread is already
  // running a parallel job, the tasks run inline on the caller (no waiting on each other).
  void ParallelFor(int num_tasks, const std::function<void(int)>& task);

  // The byte count from which a kernel should go parallel (KVSTORE_CPU_PARALLEL_MIN_BYTES,
  // default 4 MiB of traffic).
  size_t parallel_min_bytes() const { return parallel_min_bytes_; }

 private:
  WorkerPool(int width, size_t parallel_min_bytes, int spin_us);
  void WorkerLoop();
  void RunTasks();
  // Spins up to spin_us_ microseconds until pred() holds; false if it never did. Waking a
  // sleeping thread costs tens of microseconds on small VMs, so both sides of a hand-off
  // spin briefly before they block (KVSTORE_CPU_SPIN_US, default 50; 0 disables).
  template <typename Pred>
  bool SpinUntil(Pred pred) const;

  std::vector<std::thread> threads_;
  size_t parallel_min_bytes_;
  int spin_us_;
  std::mutex job_owner_mu_;  // held by the thread whose job is running

  // Job state. Written under mu_; generation_, unfinished_ and stopping_ are also read
  // without it by spinning threads (then re-checked under mu_ before blocking).
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int)>* task_ = nullptr;
  int num_tasks_ = 0;
  int next_task_ = 0;
  std::atomic<int> unfinished_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
};

// Splits [0, n) into `parts` contiguous ranges whose boundaries are multiples of `align`.
inline void SplitRange(int64_t n, int parts, int part, int64_t align, int64_t* begin, int64_t* end) {
  int64_t chunk = (n + parts - 1) / parts;
  chunk = (chunk + align - 1) / align * align;
  *begin = std::min<int64_t>(n, chunk * part);
  *end = std::min<int64_t>(n, *begin + chunk);
}

}  // namespace kvstore
