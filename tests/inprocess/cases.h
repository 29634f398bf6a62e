// cases.h - the checks every in-process case makes (a job ended cleanly), and the case
// runner of tests/common/cases.h under the names these programs use.
#pragma once

#include "../common/cases.h"

// Every node of the job (a JobResult) ended without an error.
#define CHECK_JOB_OK(result) \
  CHECK_MSG((result).ok(), "the job did not end cleanly:\n%s", (result).Describe().c_str())

namespace kvstore {
namespace inprocess {

using Case = ::TestCase;
using ::RunCases;

}  // namespace inprocess
}  // namespace kvstore
