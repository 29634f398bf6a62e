# C16: the hot paths of push, pull and pushpull (KVStore::Store, "Hot paths"). One int key with
# one NDArray, and a list of int keys with as many NDArrays, go to the library without the
# general path's _pairs; every other shape still gets the general path's result or error.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $kv = mx->kv->create('local');
$kv->init([1, 2, 3], [map { mx->nd->zeros([4]) } 1 .. 3]);

{
  # The general path fails loudly here: what still works took a hot path.
  no warnings 'redefine';
  local *KVStore::Store::_pairs = sub { die "general path taken\n" };
  my $o = mx->nd->zeros([4]);
  $kv->push(1, mx->nd->full([4], 2));
  $kv->pull(1, out => $o);
  is_deeply(vals($o), filled(2, 4), 'one key: push and pull');
  my @o = map { mx->nd->zeros([4]) } 1 .. 2;
  $kv->push([2, 3], [mx->nd->full([4], 5), mx->nd->full([4], 6)]);
  $kv->pull([2, 3], out => \@o);
  is_deeply([map { vals($_)->[0] } @o], [5, 6], 'a list of keys: push and pull');
  my $v = mx->nd->full([4], 7);
  $kv->pushpull(1, $v);
  is_deeply(vals($v), filled(7, 4), 'pushpull without out writes the value');
  $kv->pushpull([2, 3], [mx->nd->full([4], 8), mx->nd->full([4], 9)], out => \@o);
  is_deeply([map { vals($_)->[0] } @o], [8, 9], 'pushpull into outputs');
  throws_ok(sub { $kv->pull(9, out => $o) }, 'KVStore::Error::UnknownKey', [qr/9/],
    'a library error from a hot path');
}

{
  # int keys (integers or canonical strings) with plain NDArrays go through the one XS call
  # kvperl_hot_call: neither the generated calls nor the Perl checks are reached.
  no warnings 'redefine';
  local *KVStore::Store::_pairs = sub { die "general path taken\n" };
  local *KVStore::Store::_hot_keys = sub { die "Perl hot path taken\n" };
  local *KVStore::Raw::KVStorePush = sub { die "generated KVStorePush called\n" };
  local *KVStore::Raw::KVStorePull = sub { die "generated KVStorePull called\n" };
  my $o = mx->nd->zeros([4]);
  $kv->push(1, mx->nd->full([4], 3));
  $kv->pull('1', out => $o);
  is_deeply(vals($o), filled(3, 4), 'XS: one key, an integer and a canonical string');
  my @o = map { mx->nd->zeros([4]) } 1 .. 3;
  $kv->push([2, '3', 1], [map { mx->nd->full([4], $_) } 10, 11, 12]);
  $kv->pull([1, 2, '3'], out => \@o);
  is_deeply([map { vals($_)->[0] } @o], [12, 10, 11], 'XS: a list of keys');
  throws_ok(sub { $kv->push([1, 9], [$o, $o]) }, 'KVStore::Error::UnknownKey', [qr/9/],
    'XS: a library error');
}
throws_ok(sub { $kv->push('-0', mx->nd->ones([4])) }, 'KVStore::Error::KeyKindMismatch',
  [qr/-0/], "'-0' is a string key");
throws_ok(sub { $kv->push([1, 1.5], [mx->nd->ones([4]), mx->nd->ones([4])]) },
  'KVStore::Error::KeyKindMismatch', [qr/1\.5/], '1.5 is a string key');

# Shapes the hot paths refuse: the general path's errors, unchanged.
my $a = mx->nd->ones([4]);
throws_ok(sub { $kv->push('03', $a) }, 'KVStore::Error::KeyKindMismatch', [qr/03/],
  "'03' is a string key");
throws_ok(sub { $kv->push(2**31, $a) }, 'KVStore::Error::KeyKindMismatch', [qr/2147483648/],
  'an integer beyond C int is a string key');
throws_ok(sub { $kv->push([1, 'w'], [$a, $a]) }, 'KVStore::Error::KeyKindMismatch', [qr/'w'/],
  'mixed kinds in a list');
throws_ok(sub { $kv->push([1, '2,3'], [$a, $a]) }, 'KVStore::Error::KeyKindMismatch',
  [qr/'2,3'/], 'a key holding a comma in a list is a string key');
throws_ok(sub { $kv->push([1, undef], [$a, $a]) }, 'KVStore::Error::InvalidArgument',
  [qr/a key must be an int or a string, got undef/], 'an undef key in a list');
$kv->init(2000000000, mx->nd->zeros([4]));
$kv->push([1, 2000000000], [mx->nd->full([4], 8), mx->nd->full([4], 9)]);
my @big = map { mx->nd->zeros([4]) } 1 .. 2;
$kv->pull([2000000000, 1], out => \@big);
is_deeply([map { vals($_)->[0] } @big], [9, 8], 'a 10-digit int key in a list (general path)');
throws_ok(sub { $kv->push([1], $a) }, 'KVStore::Error::InvalidArgument',
  [qr/list of keys needs a list of values/], 'a list of keys with one value');
throws_ok(sub { $kv->push([1, 2], [$a]) }, 'KVStore::Error::InvalidArgument',
  [qr/2 keys but 1 values/], 'count mismatch');
throws_ok(sub { $kv->push(1, 'x') }, 'KVStore::Error::InvalidArgument',
  [qr/expected an NDArray, got 'x'/], 'not an array');
throws_ok(sub { $kv->pull([1], out => [undef]) }, 'KVStore::Error::InvalidArgument',
  [qr/expected an NDArray, got 'undef'/], 'undef output');
throws_ok(sub { $kv->pull(1, into => $a) }, 'KVStore::Error::InvalidArgument',
  [qr/unknown option 'into'/], 'an unknown option');
my $kept;
$kv->_set_updater(sub { my ($k, $in, $st) = @_; $kept = $in; $st += $in });
$kv->push(1, $a);
$kv->_set_updater(undef);
throws_ok(sub { $kv->push(1, $kept) }, 'KVStore::Error::InvalidArgument',
  [qr/valid only during that call/], 'a view kept past its updater call');
$kv->_set_updater(sub { die "updater failed for key $_[0]\n" });
eval { $kv->push(1, $a) };
like($@, qr/updater failed for key 1/, "an updater's exception from a hot push");
$kv->_set_updater(undef);
my $o = mx->nd->zeros([4]);
$kv->pull(1, out => $o, priority => 2);
is_deeply(vals($o), filled(9, 4), 'stored value: 8 + 1, the failed push changed nothing');
$kv->close;
throws_ok(sub { $kv->push(1, $a) }, 'KVStore::Error', [qr/closed/], 'a closed store');
done_testing;
