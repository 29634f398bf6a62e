// test_harness.cc - the harness itself: a node that does not finish by the job's deadline
// ends the process with a message naming it and the step (ctest matches the message), so a
// hanging in-process test fails in seconds instead of running into the ctest timeout.
//
//   deadline_names_hung_worker   worker 1 blocks in a step; the process ends naming it
#include <chrono>
#include <thread>

#include "cases.h"
#include "job.h"

namespace kvstore {
namespace inprocess {
namespace {

void DeadlineNamesHungWorker() {
  Job::Options o;
  o.num_workers = 2;
  o.num_servers = 1;
  o.deadline_sec = 3;
  Job job(o);
  CHECK(job.formed());
  if (!job.formed()) return;
  job.OnEachWorker("a step that hangs", [](int rank, Store&) {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(50));
  });
  CHECK(!"the harness returned from a step that outlived the job's deadline");
}

const Case kCases[] = {
    {"deadline_names_hung_worker", DeadlineNamesHungWorker},
};

}  // namespace
}  // namespace inprocess
}  // namespace kvstore

int main(int argc, char** argv) { return kvstore::inprocess::RunCases(argc, argv, kvstore::inprocess::kCases); }
