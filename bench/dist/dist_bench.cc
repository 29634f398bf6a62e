// dist_bench - throughput and latency of the distributed store over loopback, next to raw
// ZeroMQ measured in the same run.
//
//   kvstore-launch -n W -s S --server-cmd kvstore-server -- dist_bench
//       [--sizes 4K,64K,1M,16M,64M] [--seconds 0.5] [--window 8] [--reps 3]
//       [--ops push,pull,pushpull]
//
// Per size, `reps` repetitions alternate raw ZeroMQ (worker 0 only) and the store, so that
// both see the same machine load (this matters on a shared 2-vCPU VM):
//   raw      a child process (this program re-executed with --zmq-peer) runs a PULL sink
//            and a ROUTER echo; worker 0 sends zero-copy messages: one-way PUSH (n
//            messages then a SYNC/ACK round trip) and DEALER request/reply with `window`
//            requests in flight; plus the median round trip of one request.
//   store    one key of that many bytes (float32, dist_sync, no optimizer), every worker:
//            push      n pushes (they return at once), then WaitAll
//            pull      n pulls round-robin into `window` outputs, then WaitToRead
//            pushpull  n pushpulls likewise
//            latency   (<= 64 KiB) one synchronous push (push + WaitAll) / pull (+ WaitToRead)
// GB/s = 1e9 B/s per worker; pushpull and the echo count both directions. Ratios: the job's
// aggregate (W x per-worker) for push and pull against one-way ZeroMQ, for pushpull against
// the echo; medians of per-repetition ratios.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.hpp>

#include <algorithm>
#include <limits>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvstore/kvstore.h"

extern char** environ;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#define OK(call)                                                                         \
  do {                                                                                   \
    int rc_ = (call);                                                                    \
    if (rc_ != 0) {                                                                      \
      std::fprintf(stderr, "%s -> %s: %s\n", #call, KVErrorName(rc_), KVGetLastError()); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `body(n)` (n operations) in batches until each batch takes >= seconds; returns the
// median seconds per operation over 3 batches.
template <typename F>
double TimePerOp(double seconds, int window, F body) {
  int n = window;
  for (;;) {  // calibrate
    const double t0 = Now();
    body(n);
    const double dt = Now() - t0;
    if (dt >= seconds / 4 || n >= (1 << 20)) break;
    n *= 2;
  }
  std::vector<double> per_op;
  for (int b = 0; b < 3; ++b) {
    const double t0 = Now();
    int done = 0;
    while (Now() - t0 < seconds) {
      body(n);
      done += n;
    }
    per_op.push_back((Now() - t0) / done);
  }
  return Median(per_op);
}

// ---- raw ZeroMQ -------------------------------------------------------------------------

void FreeNothing(void*, void*) {}

// The peer process: a PULL sink that answers "SYNC" with "ACK" on a second connection
// (so the sender knows every earlier message arrived), and a ROUTER that echoes requests.
int ZmqPeer(const char* data_ep, const char* ack_ep, const char* echo_ep) {
  zmq::context_t ctx(1);
  zmq::socket_t pull(ctx, zmq::socket_type::pull), ack(ctx, zmq::socket_type::push),
      echo(ctx, zmq::socket_type::router);
  for (zmq::socket_t* s : {&pull, &ack, &echo}) {
    s->set(zmq::sockopt::rcvhwm, 0);
    s->set(zmq::sockopt::sndhwm, 0);
  }
  pull.connect(data_ep);
  ack.connect(ack_ep);
  echo.connect(echo_ep);
  zmq::pollitem_t items[2] = {{static_cast<void*>(pull), 0, ZMQ_POLLIN, 0},
                              {static_cast<void*>(echo), 0, ZMQ_POLLIN, 0}};
  for (;;) {
    zmq::poll(items, 2, std::chrono::milliseconds(-1));
    if (items[0].revents & ZMQ_POLLIN) {
      zmq::message_t m;
      (void)pull.recv(m);
      if (m.size() == 4 && std::memcmp(m.data(), "STOP", 4) == 0) return 0;
      if (m.size() == 4 && std::memcmp(m.data(), "SYNC", 4) == 0) {
        ack.send(zmq::str_buffer("ACK"), zmq::send_flags::none);
      }
    }
    if (items[1].revents & ZMQ_POLLIN) {
      zmq::message_t id, m;
      (void)echo.recv(id);
      (void)echo.recv(m);
      echo.send(id, zmq::send_flags::sndmore);
      echo.send(m, zmq::send_flags::none);  // the same bytes back, no copy
    }
  }
}

struct RawResult {
  double oneway_gbs;
  double echo_gbs;
  double rtt_us;  // one request/reply of `bytes` each way, median
};

// Raw ZeroMQ over loopback with zero-copy sends, in a separate process like the store's
// nodes: one-way PUSH->PULL (n messages, then a SYNC/ACK round trip), and a DEALER->ROUTER
// echo with `window` requests in flight.
RawResult MeasureRaw(const char* self, size_t bytes, double seconds, int window) {
  zmq::context_t ctx(1);
  zmq::socket_t push(ctx, zmq::socket_type::push), ack(ctx, zmq::socket_type::pull),
      dealer(ctx, zmq::socket_type::dealer);
  for (zmq::socket_t* s : {&push, &ack, &dealer}) {
    s->set(zmq::sockopt::rcvhwm, 0);
    s->set(zmq::sockopt::sndhwm, 0);
    s->bind("tcp://127.0.0.1:*");
  }
  std::string eps[3] = {push.get(zmq::sockopt::last_endpoint), ack.get(zmq::sockopt::last_endpoint),
                        dealer.get(zmq::sockopt::last_endpoint)};
  std::vector<char> buf(bytes, 1);
  pid_t pid;
  std::string a0 = self, a1 = "--zmq-peer";
  char* argv[] = {&a0[0], &a1[0], &eps[0][0], &eps[1][0], &eps[2][0], nullptr};
  if (posix_spawn(&pid, self, nullptr, nullptr, argv, environ) != 0) {
    std::perror("posix_spawn");
    std::exit(1);
  }
  auto sync = [&] {
    push.send(zmq::str_buffer("SYNC"), zmq::send_flags::none);
    zmq::message_t r;
    (void)ack.recv(r);
  };
  sync();
  RawResult res{};
  const double oneway = TimePerOp(seconds, window, [&](int n) {
    for (int i = 0; i < n; ++i) {
      zmq::message_t m(buf.data(), bytes, &FreeNothing, nullptr);
      push.send(m, zmq::send_flags::none);
    }
    sync();
  });
  const double echo = TimePerOp(seconds, window, [&](int n) {
    int sent = 0, got = 0;
    while (got < n) {
      while (sent < n && sent - got < window) {
        zmq::message_t m(buf.data(), bytes, &FreeNothing, nullptr);
        dealer.send(m, zmq::send_flags::none);
        ++sent;
      }
      zmq::message_t r;
      (void)dealer.recv(r);
      ++got;
    }
  });
  std::vector<double> rtt;
  for (int i = 0; i < 50; ++i) {
    const double t0 = Now();
    zmq::message_t m(buf.data(), bytes, &FreeNothing, nullptr);
    dealer.send(m, zmq::send_flags::none);
    zmq::message_t r;
    (void)dealer.recv(r);
    rtt.push_back((Now() - t0) * 1e6);
  }
  res.oneway_gbs = bytes / oneway / 1e9;
  res.echo_gbs = 2.0 * bytes / echo / 1e9;
  res.rtt_us = Median(rtt);
  push.send(zmq::str_buffer("STOP"), zmq::send_flags::none);
  int status = 0;
  waitpid(pid, &status, 0);
  return res;
}

size_t ParseSize(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  const std::string unit(end);
  if (unit == "K" || unit == "KiB") v *= 1024;
  else if (unit == "M" || unit == "MiB") v *= 1024 * 1024;
  else if (unit == "G" || unit == "GiB") v *= 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v);
}

std::string SizeName(size_t b) {
  char buf[32];
  if (b >= (1u << 20)) std::snprintf(buf, sizeof(buf), "%zu MiB", b >> 20);
  else std::snprintf(buf, sizeof(buf), "%zu KiB", b >> 10);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--zmq-peer") == 0) return ZmqPeer(argv[2], argv[3], argv[4]);
  std::vector<size_t> sizes = {4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  double seconds = 0.5;
  int window = 8;
  int reps = 3;
  std::string ops = "push,pull,pushpull";  // --ops: a subset, e.g. for profiling
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
    }
  }
  KVStoreHandle kv = nullptr;
  if (!KVIsWorkerNode()) {
    OK(KVStoreCreate("dist_sync", &kv));
    OK(KVStoreRunServer(kv, nullptr, nullptr));
    KVStoreFree(kv);
    return 0;
  }
  OK(KVStoreCreate("dist_sync", &kv));
  int rank = 0, n = 0;
  OK(KVStoreGetRank(kv, &rank));
  OK(KVStoreGetGroupSize(kv, &n));
  if (rank == 0) {
    std::printf("dist_bench: %d worker(s), %s server(s), window %d, %d repetitions\n", n,
                std::getenv("DMLC_NUM_SERVER"), window, reps);
    std::printf("%-7s| %-6s %-6s| %-6s %-5s| %-6s %-5s| %-6s %-5s| %-5s %-5s| %-5s\n", "size",
                "zmq1w", "zmqecho", "push", "ratio", "pull", "ratio", "pspl", "ratio",
                "pushL", "pullL", "zmqL");
  }
  for (size_t si = 0; si < sizes.size(); ++si) {
    const size_t bytes = sizes[si];
    const int64_t elems = static_cast<int64_t>(bytes / 4);
    const int key = static_cast<int>(si);
    KVArrayHandle v = nullptr;
    OK(KVArrayCreate(&elems, 1, KV_FLOAT32, KV_CPU, 0, &v));
    OK(KVArrayFill(v, 1.0));
    std::vector<KVArrayHandle> outs(static_cast<size_t>(window));
    for (auto& o : outs) OK(KVArrayCreate(&elems, 1, KV_FLOAT32, KV_CPU, 0, &o));
    OK(KVStoreInit(kv, 1, &key, &v));
    auto run_push = [&](int cnt) {
      for (int i = 0; i < cnt; ++i) OK(KVStorePush(kv, 1, &key, &v, 0));
      OK(KVStoreWaitAll(kv));
    };
    auto run_pull = [&](int cnt) {
      for (int i = 0; i < cnt; ++i) OK(KVStorePull(kv, 1, &key, &outs[static_cast<size_t>(i % window)], 0));
      for (auto& o : outs) OK(KVArrayWaitToRead(o));
    };
    auto run_pushpull = [&](int cnt) {
      for (int i = 0; i < cnt; ++i) {
        KVArrayHandle o = outs[static_cast<size_t>(i % window)];
        OK(KVStorePushPull(kv, 1, &key, &v, 1, &key, &o, 0));
      }
      for (auto& o : outs) OK(KVArrayWaitToRead(o));
    };
    // Fixed counts, identical on every worker (sync rounds need every worker's push):
    // about `seconds` worth at 1 GB/s, at least `window`.
    const int count = std::max(window, static_cast<int>(std::min<double>(4096, seconds * 1e9 / bytes)));
    auto timed = [&](auto& fn) {
      std::vector<double> per;
      for (int b = 0; b < 3; ++b) {
        OK(KVStoreBarrier(kv));
        const double t0 = Now();
        fn(count);
        per.push_back((Now() - t0) / count);
      }
      return Median(per);
    };
    auto lat = [&](bool push) {
      std::vector<double> per;
      OK(KVStoreBarrier(kv));
      for (int i = 0; i < 50; ++i) {
        const double t0 = Now();
        if (push) {
          OK(KVStorePush(kv, 1, &key, &v, 0));
          OK(KVStoreWaitAll(kv));
        } else {
          OK(KVStorePull(kv, 1, &key, &outs[0], 0));
          OK(KVArrayWaitToRead(outs[0]));
        }
        per.push_back(Now() - t0);
      }
      return Median(per);
    };
    run_push(window);  // warm-up: connections, buffers
    run_pull(window);
    // Raw ZeroMQ and the store alternate, so that both see the same machine load; the
    // figures are medians over the repetitions, the ratios medians of per-repetition ratios.
    std::vector<double> z1, ze, gp, gl, gpp, rp, rl, rpp, lp, ll, zl;
    for (int rep = 0; rep < reps; ++rep) {
      RawResult raw{};
      if (rank == 0) raw = MeasureRaw(argv[0], bytes, seconds / 3, window);
      auto wanted = [&](const char* op) {
        return ("," + ops + ",").find(std::string(",") + op + ",") != std::string::npos;
      };
      const double nan = std::numeric_limits<double>::quiet_NaN();
      const double t_push = wanted("push") ? timed(run_push) : nan;
      const double t_pull = wanted("pull") ? timed(run_pull) : nan;
      const double t_pp = wanted("pushpull") ? timed(run_pushpull) : nan;
      if (bytes <= (1u << 16)) {
        lp.push_back(lat(true) * 1e6);
        ll.push_back(lat(false) * 1e6);
        if (rank == 0) zl.push_back(raw.rtt_us);
      }
      z1.push_back(raw.oneway_gbs);
      ze.push_back(raw.echo_gbs);
      gp.push_back(bytes / t_push / 1e9);
      gl.push_back(bytes / t_pull / 1e9);
      gpp.push_back(2.0 * bytes / t_pp / 1e9);
      // Ratios compare the job's aggregate (every worker moves the same bytes in lockstep)
      // with the single raw stream, which already saturates a small machine.
      rp.push_back(n * gp.back() / raw.oneway_gbs);
      rl.push_back(n * gl.back() / raw.oneway_gbs);
      rpp.push_back(n * gpp.back() / raw.echo_gbs);
    }
    if (rank == 0) {
      std::printf("%-7s| %-6.2f %-7.2f| %-6.2f %-5.2f| %-6.2f %-5.2f| %-6.2f %-5.2f| ",
                  SizeName(bytes).c_str(), Median(z1), Median(ze), Median(gp), Median(rp),
                  Median(gl), Median(rl), Median(gpp), Median(rpp));
      if (!lp.empty()) std::printf("%-5.0f %-5.0f| %-5.0f\n", Median(lp), Median(ll), Median(zl));
      else std::printf("%-5s %-5s| %-5s\n", "-", "-", "-");
      std::fflush(stdout);
    }
    KVArrayFree(v);
    for (auto& o : outs) KVArrayFree(o);
  }
  if (rank == 0) {
    std::printf("GB/s per worker (1e9 B/s); ratio = W x per-worker / raw; pushpull and zmq "
                "echo count both directions; latency in us (median of 50 synchronous ops)\n");
  }
  OK(KVStoreFree(kv));
  return 0;
}
