// shm_floor - what a co-located pushpull through shared memory can reach on this machine at
// best, with no store at all: two processes, one shared mapping, one control socket, and only
// the value copies a design of N copies per round makes.
//
//   shm_floor [--sizes 16M,64M] [--copies 2,3,4] [--window 8] [--seconds 0.5] [--reps 3]
//             [--split]
//
// The "worker" (this process) runs `window` pushpull rounds in flight on one value, each in
// a slot of its own, as dist_bench's pushpull does; the "server" (a forked child) answers each
// round. A round's copies, by design:
//   4  worker: input -> ring slot; server: ring slot -> value, value -> reply slot;
//      worker: reply slot -> output (the store's shared-memory path today, ps/shm.h)
//   3  worker: input -> ring slot; server: ring slot -> value, the value in the shared
//      mapping; worker: value -> output (a server whose values the worker maps; the floor
//      ignores that the next round may overwrite the value while it is read)
//   2  worker: input -> ring slot; server: no byte (it keeps the slot as the value);
//      worker: slot -> output (a server that touches no byte of a lone worker's value)
// The worker makes its copies on one thread, as the store's worker does today (its I/O thread
// both fills ring slots and empties replies); with --split a second thread of the worker
// takes the replies and makes the copies out, while the first only copies in and sends.
// Control messages are 8 bytes over an AF_UNIX SOCK_SEQPACKET pair (cheaper than the store's
// ZeroMQ control path, so these are floors). GB/s counts both directions (2 x size per round,
// dist_bench's pushpull convention). Next to each design, in the same repetition: memcpy = one
// memcpy of the value between two buffers of the worker; mc2 = the same while the server
// process copies its own buffers at the same time (each process's rate: what two concurrent
// copies leave each). Medians over the repetitions; the order of the designs alternates.
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../common/timing.h"

namespace {

using bench::Median;
using bench::Now;

// The control protocol: the worker sends {kind, slot}; the server answers rounds with
// {kRound, slot} and anything else with its kind once done.
enum Kind : uint32_t { kRound = 1, kCopyAlong = 2, kStop = 3 };
struct Msg {
  uint32_t kind;
  uint32_t slot;
};

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "shm_floor: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

void Send(int fd, Msg m) {
  if (send(fd, &m, sizeof m, 0) != static_cast<ssize_t>(sizeof m)) Die("send");
}

Msg Recv(int fd) {
  Msg m{};
  if (recv(fd, &m, sizeof m, 0) != static_cast<ssize_t>(sizeof m)) Die("recv");
  return m;
}

// The shared mapping: `window` ring slots, `window` reply slots and the value.
struct Shared {
  char* base = nullptr;
  size_t bytes = 0;
  int window = 0;
  char* ring(uint32_t s) const { return base + s * bytes; }
  char* reply(uint32_t s) const { return base + (window + s) * bytes; }
  char* value() const { return base + 2 * window * bytes; }
};

// The server: answers rounds by the design's copies until told to stop. The design and
// size come with the fork; `own_src`/`own_dst` are its private buffers for kCopyAlong.
void Serve(int fd, const Shared& sh, int copies, size_t count) {
  std::vector<char> value(sh.bytes, 0), own_src(sh.bytes, 1), own_dst(sh.bytes, 0);
  for (;;) {
    Msg m = Recv(fd);
    if (m.kind == kStop) std::_Exit(0);
    if (m.kind == kCopyAlong) {
      for (size_t i = 0; i < count; ++i) std::memcpy(own_dst.data(), own_src.data(), sh.bytes);
      Send(fd, m);
      continue;
    }
    if (copies == 4) {
      std::memcpy(value.data(), sh.ring(m.slot), sh.bytes);
      std::memcpy(sh.reply(m.slot), value.data(), sh.bytes);
    } else if (copies == 3) {
      std::memcpy(sh.value(), sh.ring(m.slot), sh.bytes);
    }
    Send(fd, m);
  }
}

// One design at one size: the forked server, then `reps` x {rounds batch, memcpy, mc2}.
struct Figures {
  std::vector<double> pushpull, memcpy1, memcpy2;
};

double ParseSize(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end == 'K') v *= 1024;
  if (*end == 'M') v *= 1024 * 1024;
  return v;
}

void RunDesign(size_t bytes, int copies, int window, double seconds, bool split, Figures* f) {
  Shared sh;
  sh.bytes = bytes;
  sh.window = window;
  const size_t map_bytes = (2 * static_cast<size_t>(window) + 1) * bytes;
  void* p = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) Die("mmap");
  sh.base = static_cast<char*>(p);
  std::memset(sh.base, 0, map_bytes);
  // Rounds per batch: enough for `seconds` at 4 GB/s, at least 2 windows.
  const size_t rounds = std::max<size_t>(2 * window, static_cast<size_t>(seconds * 4e9 / (2 * bytes)));
  const size_t copy_count = std::max<size_t>(4, static_cast<size_t>(seconds * 4e9 / bytes / 4));
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds) != 0) Die("socketpair");
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    close(fds[0]);
    Serve(fds[1], sh, copies, copy_count);
  }
  close(fds[1]);
  const int fd = fds[0];
  std::vector<char> input(bytes, 1), mc_dst(bytes, 0);
  std::vector<std::vector<char>> outputs(window, std::vector<char>(bytes, 0));
  auto copy_out = [&](uint32_t s) {
    const char* from = copies == 4 ? sh.reply(s) : copies == 3 ? sh.value() : sh.ring(s);
    std::memcpy(outputs[s].data(), from, bytes);
  };
  // A batch: `rounds` rounds with `window` in flight, slots reused in order.
  auto batch = [&]() {
    const double t0 = Now();
    if (split) {
      // Replies arrive in send order; `done` tells the sender a slot is free again.
      std::mutex mu;
      std::condition_variable cv;
      size_t done = 0;
      std::thread receiver([&]() {
        for (size_t i = 0; i < rounds; ++i) {
          copy_out(Recv(fd).slot);
          std::lock_guard<std::mutex> lock(mu);
          done = i + 1;
          cv.notify_one();
        }
      });
      for (size_t sent = 0; sent < rounds; ++sent) {
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&]() { return sent - done < static_cast<size_t>(window); });
        }
        const uint32_t s = static_cast<uint32_t>(sent % window);
        std::memcpy(sh.ring(s), input.data(), bytes);
        input[sent % bytes] = static_cast<char>(sent);
        Send(fd, {kRound, s});
      }
      receiver.join();
      return 2.0 * bytes * rounds / (Now() - t0) / 1e9;
    }
    size_t sent = 0, done = 0;
    while (done < rounds) {
      if (sent < rounds && sent - done < static_cast<size_t>(window)) {
        const uint32_t s = static_cast<uint32_t>(sent % window);
        std::memcpy(sh.ring(s), input.data(), bytes);
        input[sent % bytes] = static_cast<char>(sent);  // not hoisted
        Send(fd, {kRound, s});
        ++sent;
        continue;
      }
      copy_out(Recv(fd).slot);
      ++done;
    }
    return 2.0 * bytes * rounds / (Now() - t0) / 1e9;
  };
  auto memcpy_rate = [&](bool along) {
    if (along) Send(fd, {kCopyAlong, 0});
    const double t0 = Now();
    for (size_t i = 0; i < copy_count; ++i) {
      std::memcpy(mc_dst.data(), input.data(), bytes);
      input[i % bytes] = static_cast<char>(i);
    }
    const double rate = bytes * static_cast<double>(copy_count) / (Now() - t0) / 1e9;
    if (along) Recv(fd);
    return rate;
  };
  batch();  // warm-up: every slot and output touched by its copies once
  f->pushpull.push_back(batch());
  f->memcpy1.push_back(memcpy_rate(false));
  f->memcpy2.push_back(memcpy_rate(true));
  Send(fd, {kStop, 0});
  int status = 0;
  waitpid(pid, &status, 0);
  close(fd);
  munmap(sh.base, map_bytes);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= s.size()) {
    size_t b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    if (b > a) out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizes = "16M,64M", designs = "2,3,4";
  int window = 8, reps = 3;
  double seconds = 0.5;
  bool split = false;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--split") {
      split = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "shm_floor: %s needs a value\n", k.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    if (k == "--sizes") sizes = v;
    else if (k == "--copies") designs = v;
    else if (k == "--window") window = std::atoi(v.c_str());
    else if (k == "--seconds") seconds = std::atof(v.c_str());
    else if (k == "--reps") reps = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "shm_floor: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (window < 1 || reps < 1 || seconds <= 0) {
    std::fprintf(stderr, "shm_floor: --window, --reps and --seconds must be positive\n");
    return 2;
  }
  std::printf("%-8s %-7s| %-8s %-8s %-8s| %-6s %-6s\n", "size", "copies", "pushpull", "memcpy",
              "mc2", "pp/mc", "pp/mc2");
  for (const std::string& size : Split(sizes)) {
    const size_t bytes = static_cast<size_t>(ParseSize(size));
    std::vector<int> order;
    for (const std::string& d : Split(designs)) order.push_back(std::atoi(d.c_str()));
    std::vector<Figures> figs(order.size());
    for (int rep = 0; rep < reps; ++rep) {
      for (size_t j = 0; j < order.size(); ++j) {
        const size_t d = rep % 2 == 0 ? j : order.size() - 1 - j;
        RunDesign(bytes, order[d], window, seconds, split, &figs[d]);
      }
    }
    for (size_t d = 0; d < order.size(); ++d) {
      std::vector<double> r1, r2;
      for (size_t r = 0; r < figs[d].pushpull.size(); ++r) {
        r1.push_back(figs[d].pushpull[r] / figs[d].memcpy1[r]);
        r2.push_back(figs[d].pushpull[r] / figs[d].memcpy2[r]);
      }
      std::printf("%-8s %-7d| %-8.2f %-8.2f %-8.2f| %-6.2f %-6.2f\n", size.c_str(), order[d],
                  Median(figs[d].pushpull), Median(figs[d].memcpy1), Median(figs[d].memcpy2),
                  Median(r1), Median(r2));
    }
    std::fflush(stdout);
  }
  return 0;
}
