# C12: float32, float64, float16, int32, int64 and uint8 arrays round-trip through
# init/push/pull, keep their dtype, and come out of aspdl as the matching PDL type.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my %cases = (
  float32 => { init => [0.5, -1.25, 3e6, 0],      push => [1.5, 2.25, -7, 0.125],
               sum => [3, 4.5, -14, 0.25],        pdl => 'float' },
  float64 => { init => [0.1, -1e300, 2**53, 1/3],  push => [0.2, 1e300, 1, 1/3],
               sum => [0.4, 2e300, 2, 2/3],        pdl => 'double' },
  float16 => { init => [0.5, -2, 65504, 2**-24],   push => [0.25, 1.5, -1, 2**-24],
               sum => [0.5, 3, -2, 2**-23],        pdl => 'float' },
  int32   => { init => [1, -2, 2**31 - 1, -2**31], push => [3, -4, -5, 1000],
               sum => [6, -8, -10, 2000],          pdl => 'long' },
  int64   => { init => [1099511627777, -3, 0, 7],  push => [2199023255555, -9, 1125899906842624, 1],
               sum => [4398046511110, -18, 2251799813685248, 2], pdl => 'longlong' },
  uint8   => { init => [0, 1, 255, 17],            push => [3, 100, 27, 0],
               sum => [6, 200, 54, 0],             pdl => 'byte' },
);

for my $dtype (sort keys %cases) {
  my $c = $cases{$dtype};
  my $kv = mx->kv->create('local');
  my $init = mx->nd->array($c->{init}, dtype => $dtype);
  is($init->dtype, $dtype, "$dtype: array() makes a $dtype array");
  $kv->init(1, $init);
  my $out = mx->nd->zeros([4], dtype => $dtype);
  $kv->pull(1, out => $out);
  is_deeply(vals($out), $c->{init}, "$dtype: init then pull round-trips exactly");
  # Two values pushed: their sum replaces the stored value (no updater: assign).
  $kv->push(1, [mx->nd->array($c->{push}, dtype => $dtype), mx->nd->array($c->{push}, dtype => $dtype)]);
  $kv->pull(1, out => $out);
  is_deeply(vals($out), $c->{sum}, "$dtype: push of two values sums them");
  is($out->dtype, $dtype, "$dtype: dtype kept");
  throws_ok(sub { $kv->push(1, mx->nd->zeros([4], dtype => $dtype eq 'int32' ? 'int64' : 'int32')) },
    'KVStore::Error::DtypeMismatch', [qr/$dtype/], "$dtype: another dtype is refused");
  SKIP: {
    skip 'PDL is not installed', 3 unless have_pdl();
    my $p = $out->aspdl;
    is($p->type . '', $c->{pdl}, "$dtype: aspdl gives a $c->{pdl} piddle");
    is_deeply([$p->list], $c->{sum}, "$dtype: aspdl values");
    my $back = mx->nd->array($p, dtype => $dtype);
    is_deeply(vals($back), $c->{sum}, "$dtype: array(piddle) round-trips");
  }
}

# int64 beyond double precision stays exact.
my $big = mx->nd->array(['4611686018427387905', '-9223372036854775808'], dtype => 'int64');
is_deeply([map {"$_"} $big->aslist], ['4611686018427387905', '-9223372036854775808'],
  'int64: 2**62+1 and INT64_MIN exact');

# Out-of-range values for integer dtypes croak instead of wrapping.
throws_ok(sub { mx->nd->array([256], dtype => 'uint8') }, 'KVStore::Error::InvalidArgument',
  [qr/256 is out of range for uint8/], 'uint8 256');
throws_ok(sub { mx->nd->array([-1], dtype => 'uint8') }, 'KVStore::Error::InvalidArgument',
  [qr/out of range/], 'uint8 -1');
throws_ok(sub { mx->nd->zeros([2], dtype => 'bfloat16') }, 'KVStore::Error::InvalidArgument',
  [qr/unknown dtype 'bfloat16'.*float16.*uint8/], 'unknown dtype lists the known ones');

# float16 rounding is to nearest even, as the library's own fill does.
my $h = mx->nd->array([1 + 2**-11, 1 + 3 * 2**-11, 65520], dtype => 'float16');
is_deeply(vals($h), [1, 1 + 2**-9, 9**9**9], 'float16: ties to even, overflow to inf');
my $f = mx->nd->full([1], 1 + 3 * 2**-11, dtype => 'float16');
is_deeply(vals($f), [1 + 2**-9], 'the library rounds the same way');

# The dtype table is the library's: every name KVDTypeName gives for a code in [0, 16).
is_deeply([KVStore::NDArray->dtypes],
  [sort grep { defined } map { KVStore::Raw::KVDTypeName($_) } 0 .. 15],
  'dtypes are the ones the library names');

SKIP: {
  skip 'PDL is not installed', 2 unless have_pdl();
  my $p = mx->nd->array([[1, 2, 3], [4, 5, 6]], dtype => 'float64')->aspdl;
  is_deeply([$p->dims], [3, 2], '(2,3) -> PDL dims (3,2)');
  is($p->at(2, 1), 6, 'row-major element (1,2) is PDL (2,1)');
}
done_testing;
