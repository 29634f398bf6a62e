# Closing a store or dropping an array while a library call on it runs (issue 10, defect 3).
# The only code that runs during a call on this thread is the store's own updater (stores and
# arrays are not cloned into other Perl threads). close() there dies with
# KVStore::Error::Busy and the store stays usable; an array whose last outside reference an
# updater drops lives until the call returns.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $kv = mx->kv->create('local');
$kv->init([1, 2], [mx->nd->ones([4]), mx->nd->ones([4])]);

# close() from inside the updater: Busy, every time, and the push goes on.
my @seen;
$kv->_set_updater(sub {
  my ($key, $input, $stored) = @_;
  push @seen, eval { $kv->close; 'closed' } // (ref $@ ? ref $@ : "$@");
  $stored += $input;
});
$kv->push([1, 2], [mx->nd->ones([4]), mx->nd->full([4], 5)]);
is_deeply(\@seen, ['KVStore::Error::Busy', 'KVStore::Error::Busy'],
  'close() inside the updater dies with KVStore::Error::Busy');
my $out = mx->nd->zeros([4]);
$kv->pull(1, out => $out);
is_deeply(vals($out), filled(2, 4), 'the push completed: key 1');
$kv->pull(2, out => $out);
is_deeply(vals($out), filled(6, 4), 'the push completed: key 2');

# An updater that lets the error escape fails its push like any updater exception.
$kv->_set_updater(sub { $kv->close });
my $e = throws_ok(sub { $kv->push(1, mx->nd->ones([4])) }, 'KVStore::Error::Busy',
  [qr/in use|not returned/], 'push whose updater closes the store');
is(ref $e && $e->code, $KVStore::Raw::KV_ERR_BUSY, 'with the code KV_ERR_BUSY');
$kv->pull(1, out => $out);
is_deeply(vals($out), filled(2, 4), 'the stored value is unchanged and the store usable');

# Arrays: an updater that drops the last outside reference to a value of the running push.
{
  package Counted;
  our @ISA = ('KVStore::NDArray');
  our $destroyed = 0;
  sub DESTROY { ++$destroyed; $_[0]->SUPER::DESTROY }
}
my $value = Counted->full([4], 7);
my $alive_in_updater;
$kv->_set_updater(sub {
  my ($key, $input, $stored) = @_;
  if ($key == 1) {
    undef $value;
    $alive_in_updater = $Counted::destroyed == 0;
  }
  $stored += $input;
});
$kv->push([1, 2], [mx->nd->ones([4]), $value]);
ok($alive_in_updater, 'an array dropped during the push that uses it is not freed then');
is($Counted::destroyed, 1, 'and it is freed once the push has returned');
$kv->pull(2, out => $out);
is_deeply(vals($out), filled(13, 4), 'its value reached the store intact');

$kv->_set_updater(undef);
ok(eval { $kv->close; 1 }, 'close() after the calls returned succeeds') or diag $@;
throws_ok(sub { $kv->rank }, 'KVStore::Error', [qr/closed/], 'the store is closed then');
done_testing;
