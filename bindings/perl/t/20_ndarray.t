# NDArray: construction, properties, overloaded arithmetic (array and scalar, both sides,
# in place), reference semantics of assignment, copies, PDL conversion, bad input.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $a = mx->nd->array([[1, 2, 3], [4, 5, 6]]);
is_deeply($a->shape, [2, 3], 'shape from nested lists');
is($a->ndim, 2, 'ndim');
is($a->size, 6, 'size');
is($a->dtype, 'float32', 'default dtype float32');
is('' . $a->context, 'cpu(0)', 'default context cpu(0)');
is("$a", '<KVStore::NDArray 2x3 @cpu(0)>', 'stringifies with shape and context');
is_deeply($a->asarray, [[1, 2, 3], [4, 5, 6]], 'asarray gives nested lists back');

is_deeply(vals(mx->nd->zeros([2, 2])), filled(0, 4), 'zeros');
is_deeply(vals(mx->nd->ones(3)), filled(1, 3), 'ones with a scalar shape');
is_deeply(vals(mx->nd->full([2], -2.5)), [-2.5, -2.5], 'full');
is(mx->nd->zeros([])->size, 1, 'rank 0 has one element');
is(mx->nd->array(7)->asscalar, 7, 'array(7) is a rank-0 scalar');
is(mx->nd->zeros([0, 3])->size, 0, 'a zero-size array');
is_deeply(mx->nd->zeros([0, 3])->asarray, [], 'asarray of a zero-size array');
is('' . mx->nd->zeros([2], ctx => mx->cpu(3))->context, 'cpu(3)', 'ctx option');

# Arithmetic.
my $b = mx->nd->array([[10, 20, 30], [40, 50, 60]]);
is_deeply(vals($a + $b), [11, 22, 33, 44, 55, 66], 'array + array');
is_deeply(vals($b - $a), [9, 18, 27, 36, 45, 54], 'array - array');
is_deeply(vals($a * $b), [10, 40, 90, 160, 250, 360], 'array * array');
is_deeply(vals($b / $a), filled(10, 6), 'array / array');
is_deeply(vals($a * 2), [2, 4, 6, 8, 10, 12], 'array * scalar');
is_deeply(vals(2 * $a), [2, 4, 6, 8, 10, 12], 'scalar * array');
is_deeply(vals($a + 0.5), [1.5, 2.5, 3.5, 4.5, 5.5, 6.5], 'array + scalar');
is_deeply(vals(10 - $a), [9, 8, 7, 6, 5, 4], 'scalar - array (swapped)');
is_deeply(vals($a - 1), [0, 1, 2, 3, 4, 5], 'array - scalar');
is_deeply(vals(12 / $a), [12, 6, 4, 3, unpack('f', pack('f', 2.4)), 2], 'scalar / array (swapped)');
is_deeply(vals($a / 2), [0.5, 1, 1.5, 2, 2.5, 3], 'array / scalar');
is_deeply(vals(-$a), [-1, -2, -3, -4, -5, -6], 'negation');
is_deeply(vals($a), [1, 2, 3, 4, 5, 6], 'operands unchanged');

# In place, and assignment shares the array.
my $c = mx->nd->ones([3]);
my $alias = $c;
$c += 2;
is_deeply(vals($alias), [3, 3, 3], '+= scalar writes the shared array');
$c *= mx->nd->array([1, 2, 3]);
is_deeply(vals($c), [3, 6, 9], '*= array');
$c -= mx->nd->ones([3]);
is_deeply(vals($c), [2, 5, 8], '-= array');
$c /= 2;
is_deeply(vals($alias), [1, 2.5, 4], '/= scalar, seen through the alias');
ok($alias == $c, 'the alias is the same array (==)');
ok($c != $c->copy, 'a copy is another array (!=)');
ok(!($c == 1), 'an array is not equal to a number');

# Errors from the library through the operators.
throws_ok(sub { $a + mx->nd->ones([3, 2]) }, 'KVStore::Error::ShapeMismatch',
  [qr/\(2,\s*3\)/, qr/\(3,\s*2\)/], 'shape mismatch in +');
throws_ok(sub { $a * mx->nd->ones([2, 3], dtype => 'int32') }, 'KVStore::Error::DtypeMismatch',
  [qr/float32/, qr/int32/], 'dtype mismatch in *');
my $i = mx->nd->array([4, 6], dtype => 'int32');
throws_ok(sub { $i / 0 }, 'KVStore::Error::InvalidArgument', [qr/division by zero/],
  'integer division by zero');
$i /= 4;
is_deeply(vals($i), [1, 1], 'integer division truncates');
throws_ok(sub { $a + 'abc' }, 'KVStore::Error::InvalidArgument',
  [qr/cannot apply '\+' to an NDArray and 'abc'/], 'a non-number operand');
throws_ok(sub { $c += [1] }, 'KVStore::Error::InvalidArgument', [qr/cannot apply '\+='/],
  'a list operand in place');

# Copies and contexts.
my $d = $a->copy;
$d += 1;
is_deeply(vals($a), [1, 2, 3, 4, 5, 6], 'copy is independent');
my $e = $a->copyto(mx->cpu(2));
is('' . $e->context, 'cpu(2)', 'copyto(context)');
my $f = mx->nd->zeros([2, 3]);
$a->copyto($f);
is_deeply(vals($f), vals($a), 'copyto(array)');
is($a->as_in_context(mx->cpu(0)), $a, 'as_in_context on the same device returns itself');
my $g = $a->astype('int64');
is($g->dtype, 'int64', 'astype');
is_deeply(vals($g), [1, 2, 3, 4, 5, 6], 'astype values');
$f->set([[6, 5, 4], [3, 2, 1]]);
is_deeply(vals($f), [6, 5, 4, 3, 2, 1], 'set from nested lists');
$f->fill(0.25);
is_deeply(vals($f), filled(0.25, 6), 'fill');
is(length($f->tobytes), 24, 'tobytes: 6 float32');
$f->wait_to_read;

# Bad input croaks precisely.
throws_ok(sub { mx->nd->zeros('two') }, 'KVStore::Error::InvalidArgument',
  [qr/zeros: shape must be an array ref of non-negative integers, got 'two'/], 'shape string');
throws_ok(sub { mx->nd->ones([2, -1]) }, 'KVStore::Error::InvalidArgument',
  [qr/ones: shape .* got \['2', '-1'\]/], 'negative dim');
throws_ok(sub { mx->nd->zeros([2], context => mx->cpu(0)) }, 'KVStore::Error::InvalidArgument',
  [qr/unknown option 'context'/], 'unknown option');
throws_ok(sub { mx->nd->zeros([2], ctx => 'cpu(0)') }, 'KVStore::Error::InvalidArgument',
  [qr/ctx must be a context/], 'ctx as a string');
throws_ok(sub { mx->nd->array([[1, 2], [3]]) }, 'KVStore::Error::InvalidArgument',
  [qr/ragged/], 'ragged data');
throws_ok(sub { mx->nd->array([1, 'x']) }, 'KVStore::Error::InvalidArgument',
  [qr/element 'x' is not a number/], 'non-numeric data');
throws_ok(sub { $f->set([1, 2]) }, 'KVStore::Error::InvalidArgument',
  [qr/2 values for an array of 6 elements/], 'set with the wrong count');
throws_ok(sub { mx->nd->full([2], undef) }, 'KVStore::Error::InvalidArgument',
  [qr/fill value must be a number/], 'full without a value');
throws_ok(sub { $a->asscalar }, 'KVStore::Error::InvalidArgument', [qr/6 elements/],
  'asscalar of 6 elements');
throws_ok(sub { mx->cpu(-1) }, 'KVStore::Error::InvalidArgument', [qr/non-negative/],
  'negative device id');
throws_ok(sub { KVStore::Context->new('tpu', 0) }, 'KVStore::Error::InvalidArgument',
  [qr/'cpu' or 'gpu'/], 'unknown device type');

# GPU contexts without a GPU run as CPU (with one warning); with the fallback off, the
# library's DEVICE error.
SKIP: {
  skip 'a GPU is present', 3 if mx->num_gpus > 0;
  my @warnings;
  local $SIG{__WARN__} = sub { push @warnings, @_ };
  my $on_gpu = mx->nd->ones([2], ctx => mx->gpu(1));
  is('' . $on_gpu->context, 'cpu(1)', 'gpu(1) runs as cpu(1) without a GPU');
  like("@warnings", qr/no GPU available/, 'with a warning');
  local $KVStore::Context::GPU_AS_CPU = 0;
  throws_ok(sub { mx->nd->ones([2], ctx => mx->gpu(0)) }, 'KVStore::Error::Device', [qr/./],
    'the library refuses gpu(0) when asked directly');
}

SKIP: {
  skip 'PDL is not installed', 5 unless have_pdl();
  my $p = $a->aspdl;
  isa_ok($p, 'PDL');
  is_deeply([$p->dims], [3, 2], 'dims reversed');
  is_deeply([$p->list], [1, 2, 3, 4, 5, 6], 'values in row-major order');
  my $q = PDL::Core::pdl([[1, 2], [3, 4], [5, 6]]);    # PDL dims (2,3): 3 rows of 2
  my $n = mx->nd->array($q);
  is_deeply($n->shape, [3, 2], 'array(piddle): shape is the reversed dims');
  is($n->dtype, 'float64', 'array(piddle): dtype from the piddle (double)');
}
done_testing;
