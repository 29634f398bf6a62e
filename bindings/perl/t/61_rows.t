# NDArray rows: at, slice, set_row (copies; the C ABI has no views).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $a = mx->nd->array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]);
my $r = $a->at(1);
is_deeply($r->shape, [3], 'a row has the shape shape[1..]');
is_deeply(vals($r), [3, 4, 5], 'at(1)');
$r->fill(0);
is_deeply(vals($a->at(1)), [3, 4, 5], 'a row is a copy');
is_deeply(vals($a->at(-1)), [9, 10, 11], 'at(-1) counts from the end');
is_deeply(vals($a->slice(1, 3)), [3, 4, 5, 6, 7, 8], 'slice(1, 3)');
is_deeply($a->slice(-1)->shape, [1, 3], 'slice(-1): the last row');
is_deeply($a->slice(3, 1)->shape, [0, 3], 'an empty slice');
is_deeply($a->slice(0, 100)->shape, [4, 3], 'slices clip');
is(mx->nd->array([1.5, 2.5])->at(1)->asscalar, 2.5, 'a row of a vector is a 0-d array');

is($a->set_row(0, 7), $a, 'set_row returns the array');
$a->set_row(-2, mx->nd->array([1, 2, 3]));
$a->set_row(1, [5, 5, 5]);
is_deeply(vals($a), [7, 7, 7, 5, 5, 5, 1, 2, 3, 9, 10, 11], 'set_row writes the rows');

my @before = @{ vals($a) };
throws_ok(sub { $a->at(4) }, 'KVStore::Error::InvalidArgument', [qr/row 4 is out of range/],
  'at out of range');
throws_ok(sub { $a->set_row(-5, 1) }, 'KVStore::Error::InvalidArgument', [qr/-5/],
  'set_row out of range');
throws_ok(sub { $a->set_row(0, mx->nd->zeros([4])) }, 'KVStore::Error::ShapeMismatch', [qr/./],
  'a value of another shape');
throws_ok(sub { $a->set_row(0, mx->nd->zeros([3], dtype => 'float64')) },
  'KVStore::Error::DtypeMismatch', [qr/./], 'a value of another dtype');
throws_ok(sub { $a->at('x') }, 'KVStore::Error::InvalidArgument', [qr/integer/], 'a bad index');
throws_ok(sub { mx->nd->full([], 1)->at(0) }, 'KVStore::Error::InvalidArgument', [qr/0-d/],
  'a 0-d array has no rows');
my $i = mx->nd->zeros([2, 2], dtype => 'uint8');
throws_ok(sub { $i->set_row(0, 300) }, 'KVStore::Error::InvalidArgument', [qr/./],
  'a value the dtype cannot hold');
is_deeply(vals($a), \@before, 'failed row writes change nothing');
is_deeply(vals($i), [0, 0, 0, 0], 'nor in the uint8 array');

# Inside an updater the arrays are borrowed: rows go through copies and back.
my $kv = mx->kv->create('local');
$kv->init(1, mx->nd->zeros([3, 2]));
$kv->_set_updater(sub { my ($key, $input, $stored) = @_; $stored->set_row($key, $input->at($key) * 10) });
$kv->push(1, mx->nd->ones([3, 2]));
my $o = mx->nd->zeros([3, 2]);
$kv->pull(1, out => $o);
is_deeply(vals($o), [0, 0, 10, 10, 0, 0], 'rows inside an updater');

done_testing;
