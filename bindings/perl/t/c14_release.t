# C14: release. 10^5 array create/free cycles and 10^3 stores with an updater keep the
# resident set flat (measured from /proc/self/status before and after, growth bounded);
# freeing a store (or replacing its updater) releases the Perl code ref: its reference count
# drops back and an object captured by the closure is destroyed.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use B ();
use KVTest;
use KVStore;

plan skip_all => '/proc/self/status is not readable here' unless defined rss_kb();

my $BOUND_KB = 4096;    # allowed RSS growth over each measured loop

sub refcnt { B::svref_2object($_[0])->REFCNT }

# Arrays: warm up (allocator pools, method caches), then measure.
for (1 .. 2000) { my $a = mx->nd->zeros([16]); }
my $before = rss_kb();
for my $i (1 .. 100_000) {
  my $a = mx->nd->zeros([16], dtype => $i % 2 ? 'float32' : 'float64');
}
my $after = rss_kb();
cmp_ok($after - $before, '<', $BOUND_KB,
  "10^5 array create/free cycles: RSS $before kB -> $after kB (bound $BOUND_KB kB)");

# Arithmetic temporaries are freed as well.
my $x = mx->nd->ones([64]);
for (1 .. 2000) { my $y = $x * 2 + 1; }
$before = rss_kb();
for (1 .. 20_000) { my $y = ($x * 2 + 1) / 3 - $x; }
$after = rss_kb();
cmp_ok($after - $before, '<', $BOUND_KB, "2x10^4 expressions (4 temporaries each): RSS $before kB -> $after kB");

# Stores with an updater set, each pushed once.
sub store_cycle {
  my $kv = mx->kv->create('local');
  $kv->_set_updater(sub { my ($k, $in, $st) = @_; $st += $in });
  $kv->init(1, mx->nd->zeros([8]));
  $kv->push(1, mx->nd->ones([8]));
}
store_cycle() for 1 .. 100;
$before = rss_kb();
store_cycle() for 1 .. 1000;
$after = rss_kb();
cmp_ok($after - $before, '<', $BOUND_KB, "10^3 stores with an updater: RSS $before kB -> $after kB");

# The free hook releases the Perl reference.
{
  package Tracker;
  our $destroyed = 0;
  sub new { bless {}, shift }
  sub DESTROY { $destroyed++ }
}
{
  my $tracker = Tracker->new;
  my $code = sub { my ($k, $in, $st) = @_; $tracker->{seen}++; $st += $in };
  my $base = refcnt($code);
  my $kv = mx->kv->create('local');
  $kv->_set_updater($code);
  cmp_ok(refcnt($code), '>', $base, 'registering the updater takes references to the code');
  $kv->init(1, mx->nd->zeros([2]));
  $kv->push(1, mx->nd->ones([2]));
  is($tracker->{seen}, 1, 'the updater ran');
  undef $kv;    # DESTROY -> KVStoreFree -> free hook
  is(refcnt($code), $base, 'freeing the store drops them again');
  undef $tracker;
  undef $code;
  is($Tracker::destroyed, 1, 'the object captured by the closure is destroyed');
}
{
  local $Tracker::destroyed = 0;
  my $kv = mx->kv->create('local');
  {
    my $t = Tracker->new;
    $kv->_set_updater(sub { $t });
  }
  is($Tracker::destroyed, 0, 'the store keeps the closure (and its captures) alive');
  $kv->_set_updater(sub { 1 });
  is($Tracker::destroyed, 1, 'replacing the updater releases the previous one');
  $kv->_set_updater(undef);
  $kv->close;
  ok(!defined $kv->{handle}, 'close frees the store at once');
  throws_ok(sub { $kv->type }, 'KVStore::Error::NullPointer', [qr/closed/], 'a closed store croaks');
}
# An updater that replaces itself while it runs: the old sub stays alive for the rest of its
# call and is released once the push is over.
{
  local $Tracker::destroyed = 0;
  my $kv = mx->kv->create('local');
  $kv->init(1, mx->nd->zeros([2]));
  my @events;
  {
    my $t = Tracker->new;
    $kv->_set_updater(sub {
      my ($k, $in, $st) = @_;
      my $keep = $t;
      $kv->_set_updater(sub { $_[2] += $_[1] * 10 });
      push @events, "replaced, destroyed=$Tracker::destroyed";
      $st += $in;
    });
  }
  $kv->push(1, mx->nd->ones([2]));
  is_deeply(\@events, ['replaced, destroyed=0'], 'the running updater was not released under itself');
  is($Tracker::destroyed, 1, 'it is released after the push');
  $kv->push(1, mx->nd->ones([2]));
  my $o = mx->nd->zeros([2]);
  $kv->pull(1, out => $o);
  is_deeply(vals($o), [11, 11], 'the new updater runs on the next push (1 + 10)');
}

# A store freed with an updater whose sub is the only reference.
{
  local $Tracker::destroyed = 0;
  {
    my $kv = mx->kv->create('local');
    my $t = Tracker->new;
    $kv->_set_updater(sub { $t });
  }
  is($Tracker::destroyed, 1, 'a store going out of scope releases its updater\'s captures');
}
done_testing;
