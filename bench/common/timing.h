// timing.h - the clock and the statistic every bench program reports with: seconds on the
// steady clock, and the median of repeated measurements (rounds are interleaved and
// repeated because these machines are shared and noisy; the median ignores the outliers).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace bench {

// Seconds on the steady clock (only differences mean anything).
inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The median of `v` (the upper one of an even count); `v` must not be empty.
inline double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace bench
