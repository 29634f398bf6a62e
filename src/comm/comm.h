// comm.h - reduction and broadcast across the arrays of one key.
//
// A Comm sums the values pushed for a key into one destination array and copies a stored
// value out to many destinations. The CPU comm is the reference implementation: multi-
// threaded for large arrays, vectorised, one pass over memory. GPU comms (src/comm/cuda,
// src/comm/nccl) plug in behind the same interface and are checked against it.
#pragma once

#include <memory>
#include <vector>

#include "core/array.h"

namespace kvstore {

class Comm {
 public:
  virtual ~Comm() = default;
  // dst <- sum(srcs). All arrays share shape and dtype (checked by the caller); srcs is not
  // empty; dst may be one of srcs only when srcs.size() == 1. Devices may differ.
  virtual void Reduce(const std::vector<const Array*>& srcs, Array* dst) = 0;
  // dsts[i] <- src for every i (any devices; shape and dtype checked by the caller).
  virtual void Broadcast(const Array& src, const std::vector<Array*>& dsts) = 0;
  // Where this comm wants the stored value (merge buffer) of a key of `nbytes` bytes whose
  // values live on `ctxs`. Called once per key, at init.
  virtual Context MergeContext(const std::vector<Context>& ctxs, size_t nbytes) = 0;
};

// Sums on the CPU; values on other devices are copied to the host first.
std::unique_ptr<Comm> CreateCpuComm();
// Sums on the device that holds the values (GPU merge buffers when built with CUDA and the
// values are on GPUs; the CPU kernels otherwise).
std::unique_ptr<Comm> CreateDeviceComm();

// The host addresses of the data of `srcs`, in order: CPU arrays are read in place, values
// on other devices are first copied into host arrays that `staged` keeps alive.
std::vector<const void*> HostAddresses(const std::vector<const Array*>& srcs,
                                       std::vector<std::unique_ptr<Array>>* staged);

}  // namespace kvstore
