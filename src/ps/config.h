// config.h - what a node of the distributed stores reads from its environment: its role,
// the job's shape, timeouts, and the address it advertises.
//
// Invariants. Every variable a node reads goes through EnvInt/EnvSeconds (one syntax, one
// error message form) or Config::Load; a Config that Load returned is valid (ranges checked,
// heartbeat timeout at least two intervals) and is not changed afterwards.
#pragma once

#include <cstdint>
#include <string>

namespace kvstore {
namespace dist {

enum class Role : int32_t { kScheduler = 0, kServer = 1, kWorker = 2 };
const char* RoleName(Role r);

// Role of this process from DMLC_ROLE (worker when unset). Throws INVALID_ARGUMENT for an
// unknown value.
Role RoleFromEnv();

// The value of an environment variable; null when it is unset or empty.
const char* EnvString(const char* name);

// Numeric environment variables; every one a node reads goes through these. A value is a
// plain decimal number (no '+', no hex, no unit) with nothing around it but blanks: " 80",
// "80 " and "80\n" all mean 80 (values pasted from files and YAML often end in a newline),
// whatever the C locale. An empty or blank value counts as unset: `dflt` (or, for a required
// variable, an error saying it is not set). Anything else, or a number outside [lo, hi], is
// INVALID_ARGUMENT naming the variable, the start of its value and the accepted range.
int64_t EnvInt(const char* name, int64_t dflt, int64_t lo, int64_t hi, bool required = false);
// Durations in seconds (fractions allowed): a number in [lo, hi], or 0 when `zero_means` is
// not null (it says what 0 means, and the error message repeats it). Keep `hi` small enough
// that a conversion to milliseconds cannot overflow.
double EnvSeconds(const char* name, double dflt, double lo, double hi,
                  const char* zero_means = nullptr);

// Everything a node reads from the environment. Load() validates; missing required
// variables are an INVALID_ARGUMENT error naming the variable.
struct Config {
  Role role = Role::kWorker;
  std::string root_uri;       // DMLC_PS_ROOT_URI
  int root_port = 0;          // DMLC_PS_ROOT_PORT
  int num_workers = 0;        // DMLC_NUM_WORKER
  int num_servers = 0;        // DMLC_NUM_SERVER
  std::string host;           // address this node advertises (DMLC_NODE_HOST/DMLC_INTERFACE)
  int port = 0;               // PORT: the server's listening port, 0 = any free port
  int requested_rank = -1;    // DMLC_WORKER_ID / DMLC_SERVER_ID, -1 = let the scheduler pick
  int verbose = 0;            // PS_VERBOSE: 1 connections, 2 every message
  int64_t bigarray_bound = 1000000;  // MXNET_KVSTORE_BIGARRAY_BOUND / KVSTORE_BIGARRAY_BOUND
  double timeout_sec = 60;           // KVSTORE_TIMEOUT_SEC; 0 = wait forever
  double heartbeat_interval_sec = 1; // KVSTORE_HEARTBEAT_INTERVAL_SEC / PS_HEARTBEAT_INTERVAL
  double heartbeat_timeout_sec = 10; // KVSTORE_HEARTBEAT_TIMEOUT_SEC / PS_HEARTBEAT_TIMEOUT
  int io_threads = 0;                // KVSTORE_IO_THREADS; 0 = IoThreads() decides
  std::string scheduler_bind;        // KVSTORE_SCHEDULER_BIND; "" = DMLC_PS_ROOT_URI
  bool shm = true;                   // KVSTORE_SHM: 0 keeps co-located peers on TCP (shm.h)
  int64_t shm_ring_bytes = int64_t{256} << 20;  // KVSTORE_SHM_RING_BYTES: each direction
  // KVSTORE_SPIN_US: how long a waiting thread of the data path (a node's I/O loop, a
  // caller waiting for its pull) keeps looking before it sleeps (ps/spin_poll.h); 0: never.
  int spin_us = 50;

  static Config Load();
  std::string SchedulerEndpoint() const;
  // ZeroMQ I/O threads of this node: KVSTORE_IO_THREADS when set, else one per peer stream
  // (servers: workers; workers: servers) up to 4. ZeroMQ spreads a socket's connections over
  // its I/O threads, so a server receives several workers' pushes in parallel.
  int IoThreads() const;
};

// The advertised host of this node (DMLC_NODE_HOST, then the address of DMLC_INTERFACE,
// then 127.0.0.1 for a loopback root URI, then the first non-loopback IPv4 address).
std::string DetectHost(const std::string& root_uri);

}  // namespace dist
}  // namespace kvstore
