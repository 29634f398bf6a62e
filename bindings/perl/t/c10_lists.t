# C10: lists. Several values for one key are summed; a pull into several outputs fills each;
# a list of keys with a list of values (and with lists of lists).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $kv = mx->kv->create('local');
$kv->init(1, mx->nd->zeros([4]));
$kv->push(1, [map { mx->nd->array([$_, 2 * $_, 3 * $_, 4 * $_], ctx => mx->cpu($_ % 3)) } 1 .. 4]);
my $o = mx->nd->zeros([4]);
$kv->pull(1, out => $o);
is_deeply(vals($o), [10, 20, 30, 40], 'four values for one key are summed (1+2+3+4)');

my @outs = map { mx->nd->zeros([4], ctx => mx->cpu($_)) } 0 .. 2;
$kv->pull(1, out => \@outs);
is_deeply(vals($_), [10, 20, 30, 40], 'output on ' . $_->context . ' filled') for @outs;

$kv->init([2, 3, 4], [map { mx->nd->full([4], $_) } 2 .. 4]);
$kv->push([2, 3, 4], [mx->nd->full([4], 20), [mx->nd->full([4], 1), mx->nd->full([4], 2)],
                      mx->nd->full([4], 40)]);
my @o3 = map { mx->nd->zeros([4]) } 1 .. 3;
$kv->pull([2, 3, 4], out => \@o3);
is_deeply([map { vals($_)->[0] } @o3], [20, 3, 40], 'list of keys, one value or a list each');

# The same key repeated in one push is summed, like a list for it.
$kv->push([2, 2], [mx->nd->full([4], 1), mx->nd->full([4], 6)]);
$kv->pull(2, out => $o);
is_deeply(vals($o), filled(7, 4), 'a key repeated in the list: values summed');

# One key, several outputs of a list of keys.
my @oo = ([mx->nd->zeros([4]), mx->nd->zeros([4])], mx->nd->zeros([4]));
$kv->pull([2, 4], out => \@oo);
is_deeply([vals($oo[0][0])->[0], vals($oo[0][1])->[0], vals($oo[1])->[0]], [7, 7, 40],
  'list of keys with a list of outputs for one');

# Count mismatches croak before anything happens.
throws_ok(sub { $kv->push([2, 3], [mx->nd->ones([4])]) }, 'KVStore::Error::InvalidArgument',
  [qr/2 keys but 1 values/], 'two keys, one value');
throws_ok(sub { $kv->push([2], mx->nd->ones([4])) }, 'KVStore::Error::InvalidArgument',
  [qr/list of keys needs a list of values/], 'list of keys, single value');
throws_ok(sub { $kv->push(2, []) }, 'KVStore::Error::InvalidArgument', [qr/no value given for key '2'/],
  'empty value list');
throws_ok(sub { $kv->push(2, [mx->nd->ones([4]), 'x']) }, 'KVStore::Error::InvalidArgument',
  [qr/expected an NDArray, got 'x'/], 'a non-array value');
throws_ok(sub { $kv->pull(2) }, 'KVStore::Error::InvalidArgument', [qr/out => NDArray/],
  'pull without out');
throws_ok(sub { $kv->pull(2, into => $o) }, 'KVStore::Error::InvalidArgument',
  [qr/unknown option 'into'/], 'pull with an unknown option');
$kv->pull(2, out => $o, priority => 3);
is_deeply(vals($o), filled(7, 4), 'priority accepted');
done_testing;
