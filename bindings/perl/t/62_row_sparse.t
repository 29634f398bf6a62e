# Row-sparse arrays (mx->nd->sparse, tostype, indices, data) and row_sparse_pull.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

# A 6x2 value whose row r holds (10r, 10r+1).
sub table { mx->nd->array([map { [10 * $_, 10 * $_ + 1] } 0 .. 5]) }

# Round trip of data and ids: rows given for ids 4, 1 are stored sorted, each with its row.
my $g = mx->nd->sparse->row_sparse_array([[[4, 4.5], [1, 1.5]], [4, 1]], shape => [6, 2]);
isa_ok($g, 'KVStore::NDArray::RowSparse');
is($g->stype, 'row_sparse', 'stype');
is(mx->nd->zeros([2])->stype, 'default', 'a dense stype');
is_deeply($g->shape, [6, 2], 'the logical shape');
is($g->num_rows, 2, 'num_rows');
is_deeply(vals($g->indices), [1, 4], 'ids sorted');
is($g->indices->dtype, 'int64', 'ids are int64');
is_deeply(vals($g->data), [1, 1.5, 4, 4.5], 'rows move with their ids');
is_deeply(vals($g->tostype('default')), [0, 0, 1, 1.5, 0, 0, 0, 0, 4, 4.5, 0, 0], 'to dense');
is_deeply(vals($g), vals($g->tostype('default')), 'aslist gives the logical contents');
is_deeply(vals(mx->nd->array([[0, 0], [0, 2], [0, 0]])->tostype('row_sparse')->indices), [1],
  'dense to row_sparse keeps the non-zero rows');
is_deeply(vals(mx->nd->sparse->row_sparse_array([[0, 0], [3, 0]])->indices), [1],
  'row_sparse_array of dense lists');
my $z = mx->nd->sparse->zeros('row_sparse', [3, 2], dtype => 'float64');
is_deeply([$z->num_rows, $z->dtype], [0, 'float64'], 'sparse zeros');
is_deeply(vals($g->copy->indices), [1, 4], 'a copy stays row_sparse');
throws_ok(sub { mx->nd->sparse->row_sparse_array([[[1, 1], [2, 2]], [3, 3]], shape => [6, 2]) },
  'KVStore::Error::InvalidArgument', [qr/index 3 appears more than once/], 'a repeated id');
throws_ok(sub { mx->nd->sparse->row_sparse_array([[[1, 1]], [6]], shape => [6, 2]) },
  'KVStore::Error::InvalidArgument', [qr/row/], 'an id out of range');
throws_ok(sub { $g->tostype('csr') }, 'KVStore::Error::InvalidArgument', [qr/csr/],
  'an unknown storage type');

# Dense-only operations die with the library's NOT_SUPPORTED (never crash).
my $e = throws_ok(sub { $g + 1 }, 'KVStore::Error::NotSupported', [qr/row_sparse/],
  'arithmetic on row_sparse');
is($e && $e->code, $KVStore::Raw::KV_ERR_NOT_SUPPORTED, 'it carries the C code');
throws_ok(sub { $g->fill(0) }, 'KVStore::Error::NotSupported', [qr/./], 'fill');
throws_ok(sub { $g->copyto(mx->nd->zeros([6, 2])) }, 'KVStore::Error::NotSupported', [qr/./],
  'copyto a dense array');
throws_ok(sub { $g->at(0) }, 'KVStore::Error::NotSupported', [qr/at is a dense operation/],
  'row indexing');
ok(!mx->nd->zeros([2, 2])->can('indices'), 'a dense array has no indices');

for my $key (7, 'w') {
  my $kv = mx->kv->create('local');
  my $h = mx->nd->sparse->row_sparse_array([mx->nd->array([[1, 1], [2, 2]]), [5, 4]],
                                           shape => [6, 2]);
  $kv->init($key, table());
  # Push with no updater: the sum by the union of rows, assigned densely.
  $kv->push($key, [$g, $h]);
  my $dense = mx->nd->zeros([6, 2]);
  $kv->pull($key, out => $dense);
  is_deeply(vals($dense), [0, 0, 1, 1.5, 0, 0, 0, 0, 6, 6.5, 1, 1],
    "push sums by the union of rows (key $key)");
  # Unordered, repeated ids; one row_ids for two outputs.
  my ($o1, $o2) = map { mx->nd->sparse->zeros('row_sparse', [6, 2]) } 1 .. 2;
  my $ids = mx->nd->array([4, 1, 4, 0], dtype => 'int64');
  $kv->row_sparse_pull($key, out => [$o1, $o2], row_ids => $ids);
  is_deeply(vals($o1->indices), [0, 1, 4], "unique sorted ids (key $key)");
  is_deeply(vals($o1->data), [0, 0, 1, 1.5, 6, 6.5], "those rows (key $key)");
  is_deeply([vals($o2->indices), vals($o2->data)], [vals($o1->indices), vals($o1->data)],
    "one row_ids serves both outputs (key $key)");
  $kv->row_sparse_pull([$key], out => [$o2], row_ids => [5, 5.0]);
  is_deeply(vals($o2->indices), [5], "row_ids as a list of numbers (key $key)");
  # Errors leave the stored value and the outputs unchanged.
  my $bad = mx->nd->sparse->row_sparse_array([[[1, 1]], [0]], shape => [5, 2]);
  throws_ok(sub { $kv->push($key, $bad) }, 'KVStore::Error::ShapeMismatch', [qr/./],
    "push of another shape (key $key)");
  throws_ok(sub { $kv->row_sparse_pull($key, out => $o1, row_ids => [1, 6]) },
    'KVStore::Error::InvalidArgument', [qr/6/], "a row id out of range (key $key)");
  throws_ok(sub { $kv->row_sparse_pull($key, out => $dense, row_ids => $ids) },
    'KVStore::Error::InvalidArgument', [qr/./], "a dense output (key $key)");
  my $after = mx->nd->zeros([6, 2]);
  $kv->pull($key, out => $after);
  is_deeply(vals($after), vals($dense), "failed calls leave the stored value (key $key)");
  is_deeply(vals($o1->indices), [0, 1, 4], "a failed row_sparse_pull leaves the output (key $key)");
}

# A built-in optimizer updates the pushed rows of a dense stored value (sgd: lazily).
my $kv = mx->kv->create('local');
$kv->init(1, mx->nd->ones([6, 2]));
$kv->set_optimizer('sgd(learning_rate=1)');
$kv->push(1, $g);
my $w = mx->nd->zeros([6, 2]);
$kv->pull(1, out => $w);
is_deeply(vals($w), [1, 1, 0, -0.5, 1, 1, 1, 1, -3, -3.5, 1, 1], 'sgd on row_sparse gradients');

# A Perl updater receives the sum as a row_sparse recv.
$kv = mx->kv->create('local');
$kv->init(2, mx->nd->ones([6, 2]));
my $seen;
$kv->_set_updater(sub {
  my ($key, $recv, $stored) = @_;
  $seen = ref $recv;
  $stored += $recv->tostype('default');
});
$kv->push(2, $g);
is($seen, 'KVStore::NDArray::RowSparse', "the updater's recv is row_sparse");
$kv->pull(2, out => $w);
is_deeply([(vals($w))->[0], (vals($w))->[2]], [1, 2], 'and merges it');

done_testing;
