// dist_bench - throughput and latency of the distributed store over loopback, next to raw
// ZeroMQ measured in the same run.
//
//   kvstore-launch -n W -s S -- dist_bench
//       [--sizes 4K,64K,1M,16M,64M] [--seconds 0.5] [--window 8] [--reps 3]
//       [--ops push,pull,pushpull] [--compression 2bit|1bit] [--pull-compression 2bit]
//   kvstore-launch -n W -s S -- dist_bench --keys 100,1000,10000,100000 [--key-floats 16]
//       [--reps 5]
//
// Raw ZeroMQ is measured in the store's topology: worker 0 starts one sink process per
// server (this program re-executed with --zmq-sink), and every worker moves the same bytes to
// the same places as the store would (a key below the big-array bound to one sink, a larger
// one cut into one part per sink), with ZeroMQ I/O threads as the store's nodes get and
// connections placed on them as the store places its own (a port per I/O thread):
//   push      n pushes of one float32 key (they return at once), then WaitAll
//             raw: n one-way messages per part, then a SYNC/ACK round trip per sink; and
//             (zmqack) the store's protocol in raw ZeroMQ: a header frame + the part, an ack
//             per message, `window` in flight, the sink keeping the last value
//   pull      n pulls round-robin into `window` outputs, then WaitToRead
//             raw: n GET requests per part, `window` in flight, each answered with the part
//   pushpull  n pushpulls likewise          raw: n echoes per part, `window` in flight
//   latency   (<= 64 KiB) one synchronous push (push + WaitAll) / pull (+ WaitToRead), and
//             one raw echo round trip of the same size (worker 0 to sink 0)
// Per size and repetition, each store operation is timed right next to its raw counterpart
// (3 batches each, a batch from one barrier of all workers to the next), so that both see the
// same machine load; which of the two goes first alternates. GB/s = 1e9 B/s per worker;
// pushpull and echo count both directions. A ratio is raw time over store time for the same
// bytes; medians of the per-repetition ratios. The last two columns put the pushpull rate
// next to the machine's memory bandwidth, measured in the same repetition: memcpy = GB/s of
// one memcpy of the value between two buffers of the worker, pp/mc = pspl / memcpy (the
// same-host bound for co-located peers, which pass payloads through shared memory: ps/shm.h;
// KVSTORE_SHM=0 keeps them on TCP).
//
// --compression TYPE adds a second table: per size, the store's push and pushpull timed
// without and with gradient compression (threshold 0.5) in the same run, alternating which
// goes first, with the bytes a push puts on the wire per worker: the protocol's (an 88-byte
// header plus the payload per part) and those measured on the loopback interface (received
// bytes of `lo` in /proc/net/dev over the push batches of all workers, so replies, ZeroMQ
// framing, TCP/IP headers and barriers included, divided by the pushes).
//
// --pull-compression 2bit adds a third table: per size, pulls timed without compression and with
// 2bit compression of both directions ("pull" = "1", threshold 0.5, ps/compressed_pull.h),
// alternating, with the bytes of a pull's replies per worker (protocol and loopback, over
// the pull batches); and "push+pull" (a push then a pull of the key, per iteration) without
// and with. The key does not change during the pull batches, so a compressed pull after the
// first (exact) one carries the packed zero change: the steady state of the bytes, at the
// full cost of quantising on the servers and dequantising on the worker.
//
// --keys K1,K2,... runs only the key-count table: per-key cost of many small keys in one
// call. For each K, K fresh int keys of F float32 (--key-floats, 16) are initialised in one
// call (timed once), then every repetition times, for each K in turn (the order reversed on
// odd repetitions), one push of the K keys in one call plus one pull of them in one call
// and the wait for both, repeated max(1, 20000 / K) times, from a barrier of all workers;
// each worker times its own calls, worker 0 prints. Microseconds per key (median over the
// repetitions) and the ratio to the first K (a flat per-key cost gives 1.0), in wall time
// and in CPU time of worker 0's process (steadier on a shared machine), with its minor page faults per
// key (the memory the kernel had to map and zero during the calls); the values
// pulled last are checked (K keys of W pushes of 1.0 each, summed: W).
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../../tests/common/check.h"
#include "../common/timing.h"
#include "kvstore/kvstore.h"

extern char** environ;

namespace {

using bench::Median;
using bench::Now;

// Received bytes of the loopback interface so far (/proc/net/dev), 0 when unreadable.
double LoopbackBytes() {
  FILE* f = std::fopen("/proc/net/dev", "r");
  if (!f) return 0;
  char line[512];
  double bytes = 0;
  while (std::fgets(line, sizeof(line), f)) {
    const char* p = line;
    while (*p == ' ') ++p;
    if (std::strncmp(p, "lo:", 3) == 0) bytes = std::atof(p + 3);
  }
  std::fclose(f);
  return bytes;
}

// "none" turns compression off; `pull` compresses pulls too (2bit).
void SetCompression(KVStoreHandle kv, const std::string& type, bool pull = false) {
  const char* keys[3] = {"type", "threshold", "pull"};
  const char* vals[3] = {type.c_str(), "0.5", pull ? "1" : "0"};
  REQUIRE_OK(KVStoreSetGradientCompression(kv, type == "none" ? 1 : 3, keys, vals));
}

// ---- raw ZeroMQ in the store's topology -------------------------------------------------

void FreeNothing(void*, void*) {}

constexpr char kGet[4] = {'G', 'E', 'T', '\0'};  // + uint64 size: "send me that many bytes"
constexpr char kAckMe[8] = {'A', 'C', 'K', '-', 'M', 'E', '!', '\0'};  // first of two frames

// A raw ZeroMQ wait longer than this means a sink is gone: the benchmark stops with an error
// instead of hanging.
constexpr std::chrono::milliseconds kPeerTimeout(60000);
[[noreturn]] void PeerSilent() {
  std::fprintf(stderr, "dist_bench: a raw ZeroMQ sink did not answer within %lld s\n",
               static_cast<long long>(kPeerTimeout.count() / 1000));
  std::exit(1);
}

// The raw exchanges, each standing for one store operation.
enum class Exchange { kGet, kEcho, kAcked };

// ZeroMQ I/O threads of a node with `peers` peers, as the store chooses them
// (KVSTORE_IO_THREADS, else one per peer up to 4).
int IoThreadsFor(int peers) {
  if (const char* v = std::getenv("KVSTORE_IO_THREADS")) {
    if (std::atoi(v) > 0) return std::atoi(v);
  }
  return std::max(1, std::min(peers, 4));
}

// A sink stands in for one server: this program re-executed with --zmq-sink MAX IO PARENT,
// started by worker 0, one per server. It has two ROUTER sockets on 127.0.0.1, each bound
// to IO ports, port j with the affinity of I/O thread j, as a server binds its socket;
// worker r uses port r mod IO. It prints the data ports, then the echo ports, on stdout.
// "data": one-way messages are dropped, "SYNC" is answered "ACK" (so a sender knows every
// earlier message arrived), GET+size is answered with that many bytes
// (zero-copy from one buffer), and a two-frame ACK-ME+payload message is kept (until the
// next one replaces it, as a server keeps a pushed value) and answered "ACK"; "echo": every
// message goes back as it came (no copy). IO is the number of ZeroMQ I/O threads, as a
// server gets (one per worker). A sink dies with worker 0 (PARENT), so a killed benchmark
// leaves no sink behind.
int ZmqSink(size_t max_bytes, int io_threads, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;  // worker 0 died before the request took effect
  zmq::context_t ctx(io_threads);
  zmq::socket_t data(ctx, zmq::socket_type::router), echo(ctx, zmq::socket_type::router);
  std::vector<char> buf(max_bytes, 1);
  for (zmq::socket_t* s : {&data, &echo}) {
    s->set(zmq::sockopt::rcvhwm, 0);
    s->set(zmq::sockopt::sndhwm, 0);
    for (int j = 0; j < io_threads; ++j) {
      if (io_threads > 1) s->set(zmq::sockopt::affinity, uint64_t{1} << j);
      s->bind("tcp://127.0.0.1:*");
      const std::string ep = s->get(zmq::sockopt::last_endpoint);
      std::printf("%d ", std::atoi(ep.c_str() + ep.rfind(':') + 1));
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  zmq::pollitem_t items[2] = {{static_cast<void*>(data), 0, ZMQ_POLLIN, 0},
                              {static_cast<void*>(echo), 0, ZMQ_POLLIN, 0}};
  zmq::message_t kept;
  for (;;) {
    zmq::poll(items, 2, std::chrono::milliseconds(-1));
    for (;;) {
      zmq::message_t id, m;
      if (!data.recv(id, zmq::recv_flags::dontwait)) break;
      (void)data.recv(m);
      if (m.size() == 4 && std::memcmp(m.data(), "STOP", 4) == 0) return 0;
      const bool acked = m.more();  // ACK-ME, then the payload
      if (acked) (void)data.recv(kept);
      if (acked || (m.size() == 4 && std::memcmp(m.data(), "SYNC", 4) == 0)) {
        data.send(id, zmq::send_flags::sndmore);
        data.send(zmq::str_buffer("ACK"), zmq::send_flags::none);
      } else if (m.size() == sizeof(kGet) + 8 && std::memcmp(m.data(), kGet, sizeof(kGet)) == 0) {
        uint64_t n = 0;
        std::memcpy(&n, m.data<char>() + sizeof(kGet), 8);
        data.send(id, zmq::send_flags::sndmore);
        zmq::message_t r(buf.data(), std::min<size_t>(n, buf.size()), &FreeNothing, nullptr);
        data.send(r, zmq::send_flags::none);
      }
    }
    for (;;) {
      zmq::message_t id, m;
      if (!echo.recv(id, zmq::recv_flags::dontwait)) break;
      (void)echo.recv(m);
      echo.send(id, zmq::send_flags::sndmore);
      echo.send(m, zmq::send_flags::none);
    }
  }
}

// Starts a sink and reads its 2 * io_threads ports from its stdout.
pid_t SpawnSink(const char* self, size_t max_bytes, int io_threads, std::vector<int>* ports) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::string a0 = self, a1 = "--zmq-sink", a2 = std::to_string(max_bytes),
              a3 = std::to_string(io_threads), a4 = std::to_string(getpid());
  char* argv[] = {&a0[0], &a1[0], &a2[0], &a3[0], &a4[0], nullptr};
  pid_t pid;
  if (posix_spawn(&pid, self, &fa, nullptr, argv, environ) != 0) {
    std::perror("posix_spawn");
    std::exit(1);
  }
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  FILE* f = fdopen(fds[0], "r");
  ports->assign(static_cast<size_t>(2 * io_threads), 0);
  for (int& port : *ports) {
    if (f == nullptr || std::fscanf(f, "%d", &port) != 1) {
      std::fprintf(stderr, "dist_bench: a ZeroMQ sink did not report its ports\n");
      std::exit(1);
    }
  }
  std::fclose(f);
  return pid;
}

// Where the store puts a key of `elems` elements (DISTRIBUTED.md, "Placement"): below the
// big-array bound on server key mod S, otherwise cut into S even parts, one per server.
struct Part {
  int sink;
  size_t offset, bytes;
};
std::vector<Part> Placement(int key, size_t elems, size_t esize, int num_sinks, int64_t bound) {
  std::vector<Part> parts;
  if (static_cast<int64_t>(elems) < bound || num_sinks == 1) {
    parts.push_back({key % num_sinks, 0, elems * esize});
    return parts;
  }
  for (int i = 0; i < num_sinks; ++i) {
    const size_t b = elems * i / num_sinks, e = elems * (i + 1) / num_sinks;
    parts.push_back({i, b * esize, (e - b) * esize});
  }
  return parts;
}

// A worker's connections to every sink, with ZeroMQ I/O threads as the store's worker gets
// (one per server, at most 4) and placed as the store places them: sink s on I/O thread
// s mod IO, and on the sink the port of the sink's I/O thread for this worker's rank. The
// exchanges mirror the store's operations part by part: one-way (push), GET request/reply (pull), echo (pushpull), and acknowledged one-way (the
// push protocol); `window` operations in flight for all but one-way (the store allows 8
// pushes of a key in flight, the default window).
class RawPeers {
 public:
  // ports: per sink, its sink_io data ports, then its sink_io echo ports.
  RawPeers(const std::vector<int>& ports, int num_sinks, int sink_io, int rank)
      : ctx_(IoThreadsFor(num_sinks)) {
    const int io = ctx_.get(zmq::ctxopt::io_threads);
    for (int s = 0; s < num_sinks; ++s) {
      data_.emplace_back(ctx_, zmq::socket_type::dealer);
      echo_.emplace_back(ctx_, zmq::socket_type::dealer);
      for (zmq::socket_t* sock : {&data_.back(), &echo_.back()}) {
        sock->set(zmq::sockopt::rcvhwm, 0);
        sock->set(zmq::sockopt::sndhwm, 0);
        sock->set(zmq::sockopt::linger, 0);
        sock->set(zmq::sockopt::rcvtimeo, static_cast<int>(kPeerTimeout.count()));
        if (io > 1) sock->set(zmq::sockopt::affinity, uint64_t{1} << (s % io));
      }
      const size_t base = static_cast<size_t>(2 * sink_io * s + rank % sink_io);
      data_.back().connect("tcp://127.0.0.1:" + std::to_string(ports[base]));
      echo_.back().connect("tcp://127.0.0.1:" + std::to_string(ports[base + static_cast<size_t>(sink_io)]));
    }
  }

  void OneWay(const char* buf, const std::vector<Part>& parts, int n) {
    for (int i = 0; i < n; ++i) {
      for (const Part& p : parts) {
        zmq::message_t m(const_cast<char*>(buf) + p.offset, p.bytes, &FreeNothing, nullptr);
        data_[static_cast<size_t>(p.sink)].send(m, zmq::send_flags::none);
      }
    }
    for (const Part& p : parts) data_[static_cast<size_t>(p.sink)].send(zmq::str_buffer("SYNC"), zmq::send_flags::none);
    for (const Part& p : parts) {
      zmq::message_t r;
      if (!data_[static_cast<size_t>(p.sink)].recv(r)) PeerSilent();
    }
  }

  // n operations of one request per part, `window` operations in flight: GET requests,
  // echoes, or acknowledged one-way messages (ACK-ME frame + part).
  void RequestReply(Exchange kind, const char* buf, const std::vector<Part>& parts, int n, int window) {
    std::vector<zmq::socket_t>& socks = kind == Exchange::kEcho ? echo_ : data_;
    const int per_op = static_cast<int>(parts.size());
    const int total = n * per_op;
    int sent = 0, got = 0;
    std::vector<zmq::pollitem_t> items;  // split parts go to distinct sinks
    std::vector<zmq::socket_t*> polled;
    for (const Part& p : parts) {
      polled.push_back(&socks[static_cast<size_t>(p.sink)]);
      items.push_back({static_cast<void*>(*polled.back()), 0, ZMQ_POLLIN, 0});
    }
    while (got < total) {
      while (sent < total && sent - got < window * per_op) {
        const Part& p = parts[static_cast<size_t>(sent % per_op)];
        zmq::socket_t& s = socks[static_cast<size_t>(p.sink)];
        if (kind != Exchange::kGet) {
          if (kind == Exchange::kAcked) s.send(zmq::const_buffer(kAckMe, sizeof(kAckMe)), zmq::send_flags::sndmore);
          zmq::message_t m(const_cast<char*>(buf) + p.offset, p.bytes, &FreeNothing, nullptr);
          s.send(m, zmq::send_flags::none);
        } else {
          char req[sizeof(kGet) + 8];
          const uint64_t want = p.bytes;
          std::memcpy(req, kGet, sizeof(kGet));
          std::memcpy(req + sizeof(kGet), &want, 8);
          s.send(zmq::const_buffer(req, sizeof(req)), zmq::send_flags::none);
        }
        ++sent;
      }
      if (zmq::poll(items.data(), items.size(), kPeerTimeout) == 0) PeerSilent();
      for (size_t i = 0; i < items.size(); ++i) {
        if (!(items[i].revents & ZMQ_POLLIN)) continue;
        zmq::message_t r;
        while (polled[i]->recv(r, zmq::recv_flags::dontwait)) ++got;
      }
    }
  }

  // Median round trip of one request of `bytes` to sink 0's echo, microseconds.
  double RoundTripUs(const char* buf, size_t bytes) {
    std::vector<double> rtt;
    for (int i = 0; i < 50; ++i) {
      const double t0 = Now();
      zmq::message_t m(const_cast<char*>(buf), bytes, &FreeNothing, nullptr);
      echo_[0].send(m, zmq::send_flags::none);
      zmq::message_t r;
      if (!echo_[0].recv(r)) PeerSilent();
      rtt.push_back((Now() - t0) * 1e6);
    }
    return Median(rtt);
  }

  void StopSinks() {
    for (auto& s : data_) s.send(zmq::str_buffer("STOP"), zmq::send_flags::none);
  }

 private:
  zmq::context_t ctx_;
  std::vector<zmq::socket_t> data_, echo_;
};

size_t ParseSize(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  const std::string unit(end);
  if (unit == "K" || unit == "KiB") v *= 1024;
  else if (unit == "M" || unit == "MiB") v *= 1024 * 1024;
  else if (unit == "G" || unit == "GiB") v *= 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v);
}

// CPU seconds of this process so far, all threads.
double ProcessCpuSeconds() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Minor page faults of this process so far (pages the kernel had to map, and zero, on first
// touch).
double ProcessMinorFaults() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_minflt);
}

std::vector<int> ParseCounts(const std::string& s) {
  std::vector<int> out;
  size_t p = 0;
  while (p < s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    const int v = std::atoi(s.substr(p, q - p).c_str());
    if (v > 0) out.push_back(v);
    p = q + 1;
  }
  return out;
}

// The key-count table (--keys, see the top of the file).
void KeyCountTable(KVStoreHandle kv, int rank, int workers, const std::vector<int>& counts,
                   int64_t floats, int reps) {
  struct Set {
    int k = 0;
    int iters = 1;
    std::vector<int> keys;
    std::vector<KVArrayHandle> vals, outs;
    double init_s = 0;
    std::vector<double> per_key;  // seconds, one per repetition
    std::vector<double> cpu_key;  // this process's CPU seconds (all its threads), likewise
    std::vector<double> faults_key;  // this process's minor page faults, likewise
  };
  std::vector<Set> sets(counts.size());
  int next_key = 1 << 24;  // clear of the size table's keys and the sinks' ports key
  for (size_t i = 0; i < counts.size(); ++i) {
    Set& s = sets[i];
    s.k = counts[i];
    s.iters = std::max(1, 20000 / s.k);
    for (int j = 0; j < s.k; ++j) {
      s.keys.push_back(next_key++);
      KVArrayHandle v = nullptr, o = nullptr;
      REQUIRE_OK(KVArrayCreate(&floats, 1, KV_FLOAT32, KV_CPU, 0, &v));
      REQUIRE_OK(KVArrayFill(v, 1.0));
      REQUIRE_OK(KVArrayCreate(&floats, 1, KV_FLOAT32, KV_CPU, 0, &o));
      s.vals.push_back(v);
      s.outs.push_back(o);
    }
    REQUIRE_OK(KVStoreBarrier(kv));
    const double t0 = Now();
    REQUIRE_OK(KVStoreInit(kv, s.k, s.keys.data(), s.vals.data()));
    s.init_s = Now() - t0;
  }
  auto run = [&](Set& s) {
    for (int it = 0; it < s.iters; ++it) {
      REQUIRE_OK(KVStorePush(kv, s.k, s.keys.data(), s.vals.data(), 0));
      REQUIRE_OK(KVStorePull(kv, s.k, s.keys.data(), s.outs.data(), 0));
    }
    REQUIRE_OK(KVStoreWaitAll(kv));
  };
  for (Set& s : sets) run(s);  // warm-up: send buffers, server state
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t j = 0; j < sets.size(); ++j) {
      Set& s = sets[rep % 2 == 0 ? j : sets.size() - 1 - j];
      REQUIRE_OK(KVStoreBarrier(kv));
      const double f0 = ProcessMinorFaults(), c0 = ProcessCpuSeconds(), t0 = Now();
      run(s);
      s.faults_key.push_back((ProcessMinorFaults() - f0) / s.iters / s.k);
      s.per_key.push_back((Now() - t0) / s.iters / s.k);
      s.cpu_key.push_back((ProcessCpuSeconds() - c0) / s.iters / s.k);
    }
  }
  for (Set& s : sets) {
    std::vector<float> got(static_cast<size_t>(floats));
    for (KVArrayHandle o : s.outs) {
      REQUIRE_OK(KVArrayCopyToHost(o, got.data(), got.size() * sizeof(float)));
      for (float g : got) {
        if (g != static_cast<float>(workers)) {
          std::fprintf(stderr, "dist_bench --keys: K=%d: pulled %g, expected %d\n", s.k, g, workers);
          std::exit(1);
        }
      }
    }
  }
  REQUIRE_OK(KVStoreBarrier(kv));
  if (rank == 0) {
    std::printf("dist_bench --keys: %d worker(s), push+pull of K keys of %lld float32 in one call "
                "each, %d repetitions (worker 0's times)\n",
                workers, static_cast<long long>(floats), reps);
    std::printf("%-8s %7s %10s %8s %10s %8s %12s %8s %11s\n", "K", "iters", "us/key", "ratio",
                "cpu us/key", "ratio", "init us/key", "ratio", "faults/key");
    const double per0 = Median(sets[0].per_key), cpu0 = Median(sets[0].cpu_key),
                 init0 = sets[0].init_s / sets[0].k;
    for (Set& s : sets) {
      const double per = Median(s.per_key), cpu = Median(s.cpu_key), init = s.init_s / s.k;
      std::printf("%-8d %7d %10.3f %8.2f %10.3f %8.2f %12.3f %8.2f %11.4f\n", s.k, s.iters, per * 1e6,
                  per / per0, cpu * 1e6, cpu / cpu0, init * 1e6, init / init0, Median(s.faults_key));
    }
    std::printf("us/key: wall time of worker 0's calls per key; cpu us/key: CPU time of worker "
                "0's process (application, I/O and ZeroMQ threads) per key, which load from "
                "other processes does not inflate; the servers' CPU time is not included; "
                "faults/key: worker 0's minor page faults per key (memory the kernel maps and "
                "zeroes on first touch)\n");
    std::fflush(stdout);
  }
  for (Set& s : sets) {
    for (KVArrayHandle a : s.vals) KVArrayFree(a);
    for (KVArrayHandle a : s.outs) KVArrayFree(a);
  }
}

std::string SizeName(size_t b) {
  char buf[32];
  if (b >= (1u << 20)) std::snprintf(buf, sizeof(buf), "%zu MiB", b >> 20);
  else std::snprintf(buf, sizeof(buf), "%zu KiB", b >> 10);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--zmq-sink") == 0) {
    return ZmqSink(static_cast<size_t>(std::atoll(argv[2])), std::atoi(argv[3]),
                   static_cast<pid_t>(std::atoll(argv[4])));
  }
  std::vector<size_t> sizes = {4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  double seconds = 0.5;
  int window = 8;
  int reps = 3;
  std::string ops = "push,pull,pushpull";  // --ops: a subset, e.g. for profiling
  std::string compression;                  // --compression 2bit|1bit: the second table
  bool pull_compression = false;            // --pull-compression 2bit: the third table
  std::vector<int> key_counts;              // --keys: the key-count table only
  int64_t key_floats = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--sizes") {
      sizes.clear();
      std::string s = argv[i + 1];
      size_t p = 0;
      while (p <= s.size()) {
        size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        sizes.push_back(ParseSize(s.substr(p, q - p)));
        p = q + 1;
      }
    } else if (a == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (a == "--ops") {
      ops = argv[i + 1];
    } else if (a == "--reps") {
      reps = std::max(1, std::atoi(argv[i + 1]));
    } else if (a == "--window") {
      window = std::atoi(argv[i + 1]);
    } else if (a == "--pull-compression") {  // the one type that compresses pulls
      pull_compression = std::string(argv[i + 1]) == "2bit";
    } else if (a == "--compression") {
      compression = argv[i + 1];
    } else if (a == "--keys") {
      key_counts = ParseCounts(argv[i + 1]);
    } else if (a == "--key-floats") {
      key_floats = std::max<int64_t>(1, std::atoll(argv[i + 1]));
    }
  }
  KVStoreHandle kv = nullptr;
  if (!KVIsWorkerNode()) {
    REQUIRE_OK(KVStoreCreate("dist_sync", &kv));
    REQUIRE_OK(KVStoreRunServer(kv, nullptr, nullptr));
    KVStoreFree(kv);
    return 0;
  }
  REQUIRE_OK(KVStoreCreate("dist_sync", &kv));
  int rank = 0, n = 0;
  REQUIRE_OK(KVStoreGetRank(kv, &rank));
  REQUIRE_OK(KVStoreGetGroupSize(kv, &n));
  if (!key_counts.empty()) {
    KeyCountTable(kv, rank, n, key_counts, key_floats, reps);
    REQUIRE_OK(KVStoreFree(kv));
    return 0;
  }
  const char* ns = std::getenv("DMLC_NUM_SERVER");
  const int num_servers = std::max(1, ns ? std::atoi(ns) : 1);
  int64_t bound = 1000000;  // the store's big-array bound, read as the store reads it
  for (const char* var : {"KVSTORE_BIGARRAY_BOUND", "MXNET_KVSTORE_BIGARRAY_BOUND"}) {
    if (const char* v = std::getenv(var)) bound = std::atoll(v);
  }

  // Worker 0 starts one ZeroMQ sink per server; the sinks' ports reach every worker through
  // the store itself (init by rank 0, then a pull).
  const size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  std::vector<pid_t> sinks;
  const int sink_io = IoThreadsFor(n);  // a server's I/O threads: one per worker
  std::vector<double> port_values(static_cast<size_t>(2 * sink_io * num_servers), 0.0);
  if (rank == 0) {
    for (int s = 0; s < num_servers; ++s) {
      std::vector<int> ports;
      sinks.push_back(SpawnSink(argv[0], max_bytes, sink_io, &ports));
      std::copy(ports.begin(), ports.end(), port_values.begin() + 2 * sink_io * s);
    }
  }
  {
    const int ports_key = 1 << 20;
    const int64_t len = static_cast<int64_t>(port_values.size());
    KVArrayHandle pa = nullptr;
    REQUIRE_OK(KVArrayCreate(&len, 1, KV_FLOAT64, KV_CPU, 0, &pa));
    REQUIRE_OK(KVArrayCopyFromHost(pa, port_values.data(), port_values.size() * sizeof(double)));
    REQUIRE_OK(KVStoreInit(kv, 1, &ports_key, &pa));
    REQUIRE_OK(KVStorePull(kv, 1, &ports_key, &pa, 0));
    REQUIRE_OK(KVArrayCopyToHost(pa, port_values.data(), port_values.size() * sizeof(double)));
    REQUIRE_OK(KVArrayFree(pa));
  }
  std::vector<int> ports(port_values.begin(), port_values.end());
  RawPeers raw(ports, num_servers, sink_io, rank);

  if (rank == 0) {
    std::printf("dist_bench: %d worker(s), %d server(s), window %d, %d repetitions\n", n,
                num_servers, window, reps);
    std::printf("%-7s| %-6s %-6s %-6s| %-6s %-5s| %-6s %-5s| %-6s %-5s| %-5s %-5s| %-5s| %-6s %-5s| %-6s %-5s\n",
                "size", "zmq1w", "zmqget", "zmqecho", "push", "ratio", "pull", "ratio", "pspl",
                "ratio", "pushL", "pullL", "zmqL", "zmqack", "ratio", "memcpy", "pp/mc");
  }
  std::string comp_table;  // rows of the compression table, printed after the main one
  std::string pull_table;  // rows of the pull compression table, printed last
  auto wanted = [&](const char* op) {
    return ("," + ops + ",").find(std::string(",") + op + ",") != std::string::npos;
  };
  for (size_t si = 0; si < sizes.size(); ++si) {
    const size_t bytes = sizes[si];
    const int64_t elems = static_cast<int64_t>(bytes / 4);
    const int key = static_cast<int>(si);
    const std::vector<Part> parts = Placement(key, static_cast<size_t>(elems), 4, num_servers, bound);
    KVArrayHandle v = nullptr;
    REQUIRE_OK(KVArrayCreate(&elems, 1, KV_FLOAT32, KV_CPU, 0, &v));
    REQUIRE_OK(KVArrayFill(v, 1.0));
    std::vector<char> raw_buf(bytes, 1);
    std::vector<KVArrayHandle> outs(static_cast<size_t>(window));
    for (auto& o : outs) REQUIRE_OK(KVArrayCreate(&elems, 1, KV_FLOAT32, KV_CPU, 0, &o));
    REQUIRE_OK(KVStoreInit(kv, 1, &key, &v));
    auto run_push = [&](int cnt) {
      for (int i = 0; i < cnt; ++i) REQUIRE_OK(KVStorePush(kv, 1, &key, &v, 0));
      REQUIRE_OK(KVStoreWaitAll(kv));
    };
    auto run_pull = [&](int cnt) {
      for (int i = 0; i < cnt; ++i) REQUIRE_OK(KVStorePull(kv, 1, &key, &outs[static_cast<size_t>(i % window)], 0));
      for (auto& o : outs) REQUIRE_OK(KVArrayWaitToRead(o));
    };
    auto run_pushpull = [&](int cnt) {
      for (int i = 0; i < cnt; ++i) {
        KVArrayHandle o = outs[static_cast<size_t>(i % window)];
        REQUIRE_OK(KVStorePushPull(kv, 1, &key, &v, 1, &key, &o, 0));
      }
      for (auto& o : outs) REQUIRE_OK(KVArrayWaitToRead(o));
    };
    auto raw_oneway = [&](int cnt) { raw.OneWay(raw_buf.data(), parts, cnt); };
    auto raw_get = [&](int cnt) { raw.RequestReply(Exchange::kGet, raw_buf.data(), parts, cnt, window); };
    auto raw_echo = [&](int cnt) { raw.RequestReply(Exchange::kEcho, raw_buf.data(), parts, cnt, window); };
    auto raw_acked = [&](int cnt) { raw.RequestReply(Exchange::kAcked, raw_buf.data(), parts, cnt, window); };
    // Fixed counts, identical on every worker (sync rounds need every worker's push):
    // about `seconds` worth at 1 GB/s, at least `window`. Raw ZeroMQ and the store are timed
    // alike: a batch runs from one barrier to the next, so it lasts until the slowest worker
    // is done (raw senders are not in lockstep, and one may finish first); the median over
    // 3 batches of seconds per op.
    const int count = std::max(window, static_cast<int>(std::min<double>(4096, seconds * 1e9 / bytes)));
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto timed = [&](const char* op, auto& fn) {
      if (!wanted(op)) return nan;
      std::vector<double> per;
      for (int b = 0; b < 3; ++b) {
        REQUIRE_OK(KVStoreBarrier(kv));
        const double t0 = Now();
        fn(count);
        REQUIRE_OK(KVStoreBarrier(kv));
        per.push_back((Now() - t0) / count);
      }
      return Median(per);
    };
    auto lat = [&](bool push) {
      std::vector<double> per;
      REQUIRE_OK(KVStoreBarrier(kv));
      for (int i = 0; i < 50; ++i) {
        const double t0 = Now();
        if (push) {
          REQUIRE_OK(KVStorePush(kv, 1, &key, &v, 0));
          REQUIRE_OK(KVStoreWaitAll(kv));
        } else {
          REQUIRE_OK(KVStorePull(kv, 1, &key, &outs[0], 0));
          REQUIRE_OK(KVArrayWaitToRead(outs[0]));
        }
        per.push_back(Now() - t0);
      }
      return Median(per);
    };
    run_push(window);  // warm-up: connections, buffers
    run_pull(window);
    raw_oneway(window);
    raw_get(window);
    // Raw ZeroMQ and the store alternate, so that both see the same machine load; the
    // figures are medians over the repetitions, the ratios medians of per-repetition ratios
    // (raw time over store time for the same bytes, in the same topology).
    std::vector<double> z1, zg, ze, za, gp, gl, gpp, rp, rl, rpp, ra, lp, ll, zl, mc, ppmc;
    // The memory baseline: one memcpy of the value's bytes between two buffers of this
    // process (both touched before), the median of 3 batches of `count`.
    std::vector<char> mc_src(bytes, 1), mc_dst(bytes, 0);
    auto time_memcpy = [&]() {
      std::vector<double> per;
      for (int b = 0; b < 3; ++b) {
        const double t0 = Now();
        for (int i = 0; i < count; ++i) {
          std::memcpy(mc_dst.data(), mc_src.data(), bytes);
          mc_src[static_cast<size_t>(i) % bytes] = static_cast<char>(i);  // not hoisted
        }
        per.push_back((Now() - t0) / count);
      }
      return Median(per);
    };
    for (int rep = 0; rep < reps; ++rep) {
      // Each store operation runs next to its raw counterpart(s), the raw ones first on even
      // repetitions and last on odd ones, so that neither inherits a fixed predecessor.
      auto pair = [&](const char* op, auto& raw_fn, auto& store_fn, double* t_raw, double* t_store) {
        if (rep % 2 == 0) *t_raw = timed(op, raw_fn);
        *t_store = timed(op, store_fn);
        if (rep % 2 == 1) *t_raw = timed(op, raw_fn);
      };
      double t_1w = nan, t_ack = nan, t_push = nan, t_get = nan, t_pull = nan, t_echo = nan,
             t_pp = nan;
      if (rep % 2 == 0) t_1w = timed("push", raw_oneway);
      pair("push", raw_acked, run_push, &t_ack, &t_push);
      if (rep % 2 == 1) t_1w = timed("push", raw_oneway);
      pair("pull", raw_get, run_pull, &t_get, &t_pull);
      double t_mc = nan;
      if (rep % 2 == 0) t_mc = time_memcpy();
      pair("pushpull", raw_echo, run_pushpull, &t_echo, &t_pp);
      if (rep % 2 == 1) t_mc = time_memcpy();
      if (bytes <= (1u << 16)) {
        lp.push_back(lat(true) * 1e6);
        ll.push_back(lat(false) * 1e6);
        REQUIRE_OK(KVStoreBarrier(kv));
        if (rank == 0) zl.push_back(raw.RoundTripUs(raw_buf.data(), bytes));
      }
      z1.push_back(bytes / t_1w / 1e9);
      zg.push_back(bytes / t_get / 1e9);
      ze.push_back(2.0 * bytes / t_echo / 1e9);
      za.push_back(bytes / t_ack / 1e9);
      gp.push_back(bytes / t_push / 1e9);
      gl.push_back(bytes / t_pull / 1e9);
      gpp.push_back(2.0 * bytes / t_pp / 1e9);
      rp.push_back(t_1w / t_push);
      rl.push_back(t_get / t_pull);
      rpp.push_back(t_echo / t_pp);
      ra.push_back(t_ack / t_push);
      mc.push_back(bytes / t_mc / 1e9);
      ppmc.push_back(gpp.back() / mc.back());
    }
    if (rank == 0) {
      std::printf("%-7s| %-6.2f %-6.2f %-7.2f| %-6.2f %-5.2f| %-6.2f %-5.2f| %-6.2f %-5.2f| ",
                  SizeName(bytes).c_str(), Median(z1), Median(zg), Median(ze), Median(gp),
                  Median(rp), Median(gl), Median(rl), Median(gpp), Median(rpp));
      if (!lp.empty()) std::printf("%-5.0f %-5.0f| %-5.0f", Median(lp), Median(ll), Median(zl));
      else std::printf("%-5s %-5s| %-5s", "-", "-", "-");
      std::printf("| %-6.2f %-5.2f| %-6.2f %-5.2f\n", Median(za), Median(ra), Median(mc), Median(ppmc));
      std::fflush(stdout);
    }
    // One row of a compression table: `first` and then `second` timed without (mode 0) and
    // with (mode 1) compression, alternating, as `set_mode` sets it; the protocol's bytes per
    // value when each 32-bit word carries `per_word` values, and `first`'s bytes on the wire.
    auto compare_modes = [&](auto&& set_mode, const char* first_name, auto& first,
                             const char* second_name, auto& second, double per_word) {
      double proto[2] = {0, 0};
      for (const Part& p : parts) {
        proto[0] += 88 + static_cast<double>(p.bytes);
        proto[1] += 88 + 4 * std::ceil(static_cast<double>(p.bytes / 4) / per_word);
      }
      std::vector<double> first_t[2], second_t[2], wire[2], speed, second_speed;
      for (int rep = 0; rep < reps; ++rep) {
        double t[2], t2[2];
        for (int m : {rep % 2, 1 - rep % 2}) {
          set_mode(m);
          // Warm-up: the residuals, the server's first compressed round, and the first pull
          // after a change of setting (exact: compressed-pull views reset).
          first(window);
          REQUIRE_OK(KVStoreBarrier(kv));
          const double lo0 = LoopbackBytes();
          t[m] = timed(first_name, first);
          wire[m].push_back((LoopbackBytes() - lo0) / (3.0 * count * n));
          t2[m] = timed(second_name, second);
          first_t[m].push_back(bytes / t[m] / 1e9);
          second_t[m].push_back(2.0 * bytes / t2[m] / 1e9);
        }
        speed.push_back(t[0] / t[1]);
        second_speed.push_back(t2[0] / t2[1]);
      }
      SetCompression(kv, "none");
      char row[256];
      std::snprintf(row, sizeof(row), "%-7s| %-6.2f %-6.2f %-5.2f| %-6.2f %-6.2f %-5.2f| %-9.0f %-8.0f %-5.1f| %-9.0f %-8.0f %-5.1f\n",
                    SizeName(bytes).c_str(), Median(first_t[0]), Median(first_t[1]), Median(speed),
                    Median(second_t[0]), Median(second_t[1]), Median(second_speed), proto[0], proto[1],
                    proto[0] / proto[1], Median(wire[0]), Median(wire[1]),
                    Median(wire[0]) / Median(wire[1]));
      return std::string(row);
    };
    if (!compression.empty()) {
      // Pushes and push+pull rounds, compressing pushes.
      comp_table += compare_modes(
          [&](int m) { SetCompression(kv, m ? compression : "none"); }, "push", run_push,
          "pushpull", run_pushpull, compression == "1bit" ? 32 : 16);
    }
    if (pull_compression) {
      // Pulls and push+pull rounds, 2bit compression of both directions.
      auto run_push_pull = [&](int cnt) {
        for (int i = 0; i < cnt; ++i) {
          REQUIRE_OK(KVStorePush(kv, 1, &key, &v, 0));
          REQUIRE_OK(KVStorePull(kv, 1, &key, &outs[static_cast<size_t>(i % window)], 0));
        }
        for (auto& o : outs) REQUIRE_OK(KVArrayWaitToRead(o));
      };
      pull_table += compare_modes(
          [&](int m) { SetCompression(kv, m ? "2bit" : "none", m == 1); }, "pull", run_pull,
          "pull", run_push_pull, 16);
    }
    KVArrayFree(v);
    for (auto& o : outs) KVArrayFree(o);
  }
  if (rank == 0 && pull_compression) {
    std::printf("\npull compression 2bit (threshold 0.5, pull=1: both directions), the same pulls "
                "without and with:\n%-7s| %-6s %-6s %-5s| %-6s %-6s %-5s| %-9s %-8s %-5s| %-9s %-8s %-5s\n",
                "size", "pull", "pull-c", "x", "ps+pl", "ps+pl-c", "x", "protoB", "protoB-c", "ratio",
                "loB", "loB-c", "ratio");
    std::printf("%s", pull_table.c_str());
    std::printf("GB/s per worker (ps+pl: a push then a pull, both directions counted); x = time "
                "without / time with; protoB: header + payload bytes of one pull's replies; loB: "
                "loopback bytes per pull and worker (requests, framing, TCP/IP, barriers "
                "included; payloads that go through shared memory are not on the loopback: "
                "KVSTORE_SHM=0 counts them)\n");
  }
  if (rank == 0 && !compression.empty()) {
    std::printf("\ngradient compression %s (threshold 0.5), the same pushes without and with:\n"
                "%-7s| %-6s %-6s %-5s| %-6s %-6s %-5s| %-9s %-8s %-5s| %-9s %-8s %-5s\n",
                compression.c_str(), "size", "push", "push-c", "x", "pspl", "pspl-c", "x",
                "protoB", "protoB-c", "ratio", "loB", "loB-c", "ratio");
    std::printf("%s", comp_table.c_str());
    std::printf("GB/s of gradient per worker (pushpull: both directions, compressed one way); "
                "x = time without / time with; protoB: header + payload bytes of one push; loB: "
                "loopback bytes per push and worker (replies, framing, TCP/IP, barriers included; "
                "payloads that go through shared memory are not on the loopback: KVSTORE_SHM=0 "
                "counts them)\n");
  }
  if (rank == 0) {
    std::printf("GB/s per worker (1e9 B/s); ratio = raw ZeroMQ time / store time for the same "
                "bytes in the same topology (push: one-way, pull: get, pushpull: echo); pushpull "
                "and echo count both directions; latency in us (median of 50 synchronous ops); "
                "zmqack: one-way with a header frame, an ack per message and `window` in flight, "
                "its ratio against push; memcpy: one memcpy of the value in this process (the "
                "memory baseline), pp/mc = pspl GB/s / memcpy GB/s\n");
  }
  REQUIRE_OK(KVStoreBarrier(kv));  // every worker is done with the sinks
  if (rank == 0) {
    raw.StopSinks();
    for (pid_t pid : sinks) {
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }
  REQUIRE_OK(KVStoreFree(kv));
  return 0;
}
