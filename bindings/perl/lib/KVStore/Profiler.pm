package KVStore::Profiler;

# The library's profiler (docs/PROFILING.md): a Chrome-trace timeline of this process's
# stores (pushes, pulls, messages, rounds, reductions, optimizer applies, per key with bytes)
# and per-key counters. It belongs to the process, not to a store.
#
#   use KVStore::Profiler;
#   KVStore::Profiler->start('trace.json');   # or KVSTORE_PROFILE=trace.json in the environment
#   ...                                       # pushes and pulls
#   KVStore::Profiler->stop;                  # writes trace.json (trace.worker0.json on a dist worker)
#   my $stats = KVStore::Profiler->stats;     # {node => ..., running => 0|1, keys => [{key => 3, pushes => 2, ...}]}
#
# start with no path records the counters only. start while the profiler runs, or with a
# path in a folder that cannot be written, dies with KVStore::Error::InvalidArgument.

use strict;
use warnings;

use JSON::PP ();

use KVStore::Raw ();
use KVStore::Error;

sub start {
  my ($class, $path) = @_;
  KVStore::Error->check(KVStore::Raw::KVProfileStart($path));
  return;
}

sub stop {
  KVStore::Error->check(KVStore::Raw::KVProfileStop());
  return;
}

# The counters of the current or last run, decoded (running is 0 or 1; times in
# microseconds; KVProfileGetStats in kvstore.h says what each field counts).
sub stats {
  my ($rc, $json) = KVStore::Raw::KVProfileGetStats();
  KVStore::Error->check($rc);
  my $stats = JSON::PP->new->utf8->decode($json);
  $stats->{running} = $stats->{running} ? 1 : 0;
  return $stats;
}

1;
