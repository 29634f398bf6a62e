# Perl ithreads: objects are not cloned into new threads (CLONE_SKIP, so nothing is freed
# twice), and each thread's store runs its own updater on that thread.
use strict;
use warnings;
use Config;
use Test::More;
BEGIN {
  plan skip_all => 'perl without ithreads' unless $Config{useithreads};
}
use threads;
use Scalar::Util qw(blessed);
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $kv = mx->kv->create('local');
my $main_calls = 0;
$kv->_set_updater(sub { my ($k, $in, $st) = @_; $main_calls++; $st += $in });
$kv->init(1, mx->nd->zeros([4]));
my $arr = mx->nd->ones([4]);

my @results = map {
  my $n = $_;
  threads->create(sub {
    my $seen_clone = blessed($kv) || blessed($arr) ? 'cloned' : 'not cloned';
    my $mine = mx->kv->create('local');
    my $calls = 0;
    $mine->_set_updater(sub { my ($k, $in, $st) = @_; $calls++; $st += $in * $n });
    $mine->init('w', mx->nd->zeros([4]));
    $mine->push('w', mx->nd->ones([4])) for 1 .. 3;
    my $o = mx->nd->zeros([4]);
    $mine->pull('w', out => $o);
    return join ',', $seen_clone, $calls, $o->aslist;
  });
} 1 .. 3;
my @got = map { $_->join } @results;
is_deeply(\@got, ['not cloned,3,3,3,3,3', 'not cloned,3,6,6,6,6', 'not cloned,3,9,9,9,9'],
  'each thread: no cloned objects, its own updater ran 3 times');

$kv->push(1, [$arr, $arr]);
my $o = mx->nd->zeros([4]);
$kv->pull(1, out => $o);
is_deeply(vals($o), filled(2, 4), 'the main thread\'s store and arrays still work');
is($main_calls, 1, 'the main updater ran on the main thread only');
done_testing;
