#!/usr/bin/perl
# A dist_sync job driven from the Perl binding (bindings/perl: KVStore, SWIG XS).
#
# Run by kvstore-launch for the workers (servers run kvstore-server). First a worker must
# refuse Perl updaters (they run on the servers): _set_updater and KVStoreSetStrUpdater fail
# with NOT_SUPPORTED, the library does not call the registration's free hook, and the binding
# drops its own reference to the code ref exactly once (the closure's captures are freed
# when the caller drops the sub: no leak, no double free; the library used to free it too,
# which killed the worker with SIGSEGV). Then each worker pushes ones*(rank+1) for 3 rounds
# to a small and a sharded int key with the `test` optimizer (rescale_grad=2): after
# round i every worker must pull 1 + n(n+1)/2*2*(i+1).
# Prints "PASS perl rank R".
use strict;
use warnings;

use B ();
use KVStore;

sub fail { print "FAIL: @_\n"; exit 1 }

KVStore->has_feature('dist') or fail('libkvstore was built without the distributed stores');
KVStore::Raw::KVIsWorkerNode() or fail('not a worker');

my $kv = mx->kv->create('dist_sync');
my ($rank, $n) = ($kv->rank, $kv->num_workers);
$kv->type eq 'dist_sync' or fail('type ' . $kv->type);

{
  package Canary;
  our $freed = 0;
  sub new { bless {}, shift }
  sub DESTROY { ++$freed }
}
{
  # The closure holds the only reference to its canary.
  my $code = do {
    my $canary = Canary->new;
    sub { my ($key, $in, $stored) = @_; $canary->{calls}++; $stored += $in };
  };
  my $refs = B::svref_2object($code)->REFCNT;
  eval { $kv->_set_updater($code); 1 } and fail("rank $rank: _set_updater succeeded");
  ref $@ && $@->isa('KVStore::Error::NotSupported')
    or fail("rank $rank: _set_updater died with '$@', not KVStore::Error::NotSupported");
  my $rc = KVStore::Raw::KVStoreSetStrUpdater($kv->_handle, $code);
  $rc == $KVStore::Raw::KV_ERR_NOT_SUPPORTED
    or fail("rank $rank: KVStoreSetStrUpdater returned $rc, not KV_ERR_NOT_SUPPORTED");
  KVStore::Raw::kvperl_drain_releases();
  B::svref_2object($code)->REFCNT == $refs
    or fail("rank $rank: the refused updater's reference count went from $refs to "
      . B::svref_2object($code)->REFCNT);
  $Canary::freed == 0 or fail("rank $rank: the refused updater was freed under its owner");
  undef $code;
  $Canary::freed == 1 or fail("rank $rank: the refused updater was not released (leak)");
}

my @keys = (3, 7);
my @shapes = ([5, 4], [1200]);    # 1200 elements: split over the servers (bound 1000)
$kv->set_optimizer('test(rescale_grad=2)');
$kv->init(\@keys, [map { mx->nd->ones($_) } @shapes]);
my @outs = map { mx->nd->zeros($_) } @shapes;
for my $r (0 .. 2) {
  $kv->push(\@keys, [map { mx->nd->ones($_) * ($rank + 1) } @shapes]);
  $kv->pull(\@keys, out => \@outs);
  my $want = 1 + $n * ($n + 1) / 2 * 2 * ($r + 1);
  for my $i (0 .. $#keys) {
    my @bad = grep { $_ != $want } $outs[$i]->aslist;
    fail("rank $rank round $r key $keys[$i]: got $bad[0], want $want") if @bad;
  }
}
$kv->barrier;
$kv->close;
print "PASS perl rank $rank\n";
