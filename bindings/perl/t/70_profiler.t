# KVStore::Profiler (docs/PROFILING.md): the per-key counters of a local store, the timeline
# it writes (valid JSON with the calls' and keys' spans and bytes), and refusals.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use JSON::PP ();
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;
use KVStore::Profiler;

my $dir = tempdir(CLEANUP => 1);
my $path = "$dir/t.json";
my $kv = mx->kv->create('local');
$kv->init(3, mx->nd->ones([256]));
$kv->set_optimizer('sgd(learning_rate=0.5)');
KVStore::Profiler->start($path);
throws_ok(sub { KVStore::Profiler->start($path) }, 'KVStore::Error::InvalidArgument',
  [qr/already runs/], 'a second start is refused');
$kv->push(3, mx->nd->ones([256]));
$kv->push(3, mx->nd->ones([256]));
my $o = mx->nd->zeros([256]);
$kv->pull(3, out => $o);
KVStore::Profiler->stop;

my $stats = KVStore::Profiler->stats;
is($stats->{running}, 0, 'stopped');
is(scalar @{ $stats->{keys} }, 1, 'one key');
my $k = $stats->{keys}[0];
is_deeply([@$k{qw(key pushes pulls bytes_pushed bytes_pulled applies)}], [3, 2, 1, 2048, 1024, 2],
  'counters of key 3');

open(my $fh, '<', $path) or die "$path: $!";
my $trace = JSON::PP->new->decode(do { local $/; <$fh> });
close $fh;
my @push = grep { $_->{name} eq 'push' && $_->{ph} eq 'X' } @{ $trace->{traceEvents} };
is_deeply([map { $_->{args}{bytes} } @push], [1024, 1024], 'two push spans with their bytes');
my @apply = grep { $_->{name} eq 'apply' } @{ $trace->{traceEvents} };
is_deeply([map { $_->{args}{key} } @apply], [3, 3], 'two applies of key 3');

throws_ok(sub { KVStore::Profiler->start("$dir/no/such/t.json") }, 'KVStore::Error::InvalidArgument',
  [qr/not writable/], 'an unwritable folder is refused');
KVStore::Profiler->start;    # counters only, from zero
is_deeply(KVStore::Profiler->stats->{keys}, [], 'a new run starts from zero');
KVStore::Profiler->stop;

done_testing;
