# The SWIG module KVStore::Raw on its own: statuses first, then out-parameters; malformed
# Perl input croaks in the wrapper (naming the function and the argument) before the
# library is called; library errors come back as statuses with KVGetLastError.
use strict;
use warnings;
use Test::More;
use KVStore::Raw;

my $R = 'KVStore::Raw';
my ($rc, $h) = KVStore::Raw::KVArrayCreate([2, 3], $KVStore::Raw::KV_FLOAT32, $KVStore::Raw::KV_CPU, 0);
is($rc, 0, 'KVArrayCreate status');
isa_ok($h, '_p_KVArray_', 'handle');
my ($rc2, $nd) = KVStore::Raw::KVArrayGetNDim($h);
is_deeply([$rc2, $nd], [0, 2], 'int out-parameter');
is_deeply([KVStore::Raw::KVArrayGetShape($h)], [0, [2, 3]], 'shape as an array ref');
is_deeply([KVStore::Raw::KVArrayGetSize($h)], [0, 6], 'int64 out-parameter');
is_deeply([KVStore::Raw::KVArrayGetNBytes($h)], [0, 24], 'size_t out-parameter');
is_deeply([KVStore::Raw::KVArrayGetContext($h)], [0, $KVStore::Raw::KV_CPU, 0], 'two out-parameters');
my ($rc3, $addr) = KVStore::Raw::KVArrayGetData($h);
ok($rc3 == 0 && $addr > 0, 'data address as an integer');

is(KVStore::Raw::KVArrayCopyFromHost($h, pack('f*', 1 .. 6)), 0, 'copy from a packed string');
my ($rc4, $bytes) = KVStore::Raw::KVArrayCopyToHost($h);
is($rc4, 0, 'copy to host');
is_deeply([unpack 'f*', $bytes], [1 .. 6], 'returned as a packed string of the array\'s size');
is(KVStore::Raw::KVArrayCopyFromHost($h, pack('f*', 1 .. 5)), $KVStore::Raw::KV_ERR_INVALID_ARGUMENT,
   'a wrong byte count is the library\'s INVALID_ARGUMENT');
like(KVStore::Raw::KVGetLastError(), qr/20|24/, 'its message names the byte counts');
is_deeply([KVStore::Raw::KVArrayCopyToHost(undef)], [$KVStore::Raw::KV_ERR_NULL_POINTER, undef],
  'undef array: NULL_POINTER, no data');

# Failed calls return undef out-parameters.
my @r = KVStore::Raw::KVArrayCreate([2, -1], 0, 1, 0);
is_deeply(\@r, [$KVStore::Raw::KV_ERR_INVALID_ARGUMENT, undef], 'a negative dim: status and undef');
@r = KVStore::Raw::KVArrayCreate([1], 0, 1, -1);
is($r[0], $KVStore::Raw::KV_ERR_DEVICE, 'negative device id: DEVICE');
@r = KVStore::Raw::KVArrayCreate([(1) x 33], 0, 1, 0);
is($r[0], $KVStore::Raw::KV_ERR_INVALID_ARGUMENT, '33 dims: INVALID_ARGUMENT');

# Malformed Perl input croaks.
my %croaks = (
  'shape not a ref'    => [sub { KVStore::Raw::KVArrayCreate(3, 0, 1, 0) },
                           qr/KVArrayCreate: shape must be an array reference/],
  'shape element'      => [sub { KVStore::Raw::KVArrayCreate([2, 'x'], 0, 1, 0) },
                           qr/KVArrayCreate: shape\[1\] is not an integer \('x'\)/],
  'fractional dim'     => [sub { KVStore::Raw::KVArrayCreate([2.5], 0, 1, 0) },
                           qr/shape\[0\] is not an integer \('2.5'\)/],
  'data not a string'  => [sub { KVStore::Raw::KVArrayCopyFromHost($h, [1]) },
                           qr/KVArrayCopyFromHost: data must be a packed byte string/],
  'wrong handle type'  => [sub { KVStore::Raw::KVArrayFill('nope', 1) }, qr/KVArrayFill/],
);
for my $name (sort keys %croaks) {
  my ($code, $re) = @{ $croaks{$name} };
  eval { $code->() };
  like($@, $re, "croaks: $name");
}

my ($rs, $s) = KVStore::Raw::KVStoreCreate('Local');
is($rs, 0, 'KVStoreCreate');
isa_ok($s, '_p_KVStore_');
is_deeply([KVStore::Raw::KVStoreGetType($s)], [0, 'local'], 'type string out-parameter');
is(KVStore::Raw::KVStoreInit($s, [1, 2], [$h, $h]), 0, 'init two keys from lists');
my %list_croaks = (
  'keys not a ref'   => [sub { KVStore::Raw::KVStorePush($s, 1, [$h], 0) },
                         qr/KVStorePush: keys must be an array reference/],
  'key not an int'   => [sub { KVStore::Raw::KVStorePush($s, [1, 'w'], [$h, $h], 0) },
                         qr/KVStorePush: keys\[1\] is not an int key \('w'\)/],
  'key too large'    => [sub { KVStore::Raw::KVStorePush($s, [2**31], [$h], 0) },
                         qr/keys\[0\] is not an int key/],
  'count mismatch'   => [sub { KVStore::Raw::KVStorePush($s, [1, 2], [$h], 0) },
                         qr/KVStorePush: vals has 1 elements but keys has 2/],
  'outs mismatch'    => [sub { KVStore::Raw::KVStorePushPull($s, [1], [$h], [1], [$h, $h], 0) },
                         qr/KVStorePushPull: outs has 2 elements but okeys has 1/],
  'not a handle'     => [sub { KVStore::Raw::KVStorePull($s, [1], ['x'], 0) },
                         qr/KVStorePull: outs\[0\] is not an array handle \('x'\)/],
  'store as array'   => [sub { KVStore::Raw::KVStorePull($s, [1], [$s], 0) },
                         qr/outs\[0\] is not an array handle/],
  'str key undef'    => [sub { KVStore::Raw::KVStorePushStr($s, [undef], [$h], 0) },
                         qr/KVStorePushStr: keys\[0\] is not a string key \('undef'\)/],
  'str key with NUL' => [sub { KVStore::Raw::KVStorePushStr($s, ["a\0b"], [$h], 0) },
                         qr/keys\[0\] contains a NUL character/],
  # A C string ends at its first NUL: the library would act on a prefix.
  'type with NUL'    => [sub { KVStore::Raw::KVStoreCreate("local\0dist_sync") },
                         qr/KVStoreCreate: type contains a NUL character/],
  'spec with NUL'    => [sub { KVStore::Raw::KVStoreSetOptimizer($s, "sgd(learning_rate=1)\0x") },
                         qr/KVStoreSetOptimizer: spec contains a NUL character/],
  'body with NUL'    => [sub { KVStore::Raw::KVStoreSendCommandToServers($s, 0, "a\0b") },
                         qr/KVStoreSendCommandToServers: body contains a NUL character/],
  'spec not a string' => [sub { KVStore::Raw::KVStoreSetOptimizer($s, []) },
                         qr/KVStoreSetOptimizer: spec must be a string/],
  'updater'          => [sub { KVStore::Raw::KVStoreSetUpdater($s, {}) },
                         qr/KVStoreSetUpdater: the callback must be a code reference or undef/],
);
for my $name (sort keys %list_croaks) {
  my ($code, $re) = @{ $list_croaks{$name} };
  eval { $code->() };
  like($@, $re, "croaks: $name");
}
is(KVStore::Raw::KVStorePush($s, [1], [undef], 0), $KVStore::Raw::KV_ERR_NULL_POINTER,
  'an undef handle in a list reaches the library as NULL');
is(KVStore::Raw::KVStorePush($s, [], [], 0), 0, 'empty lists');
is(KVStore::Raw::KVStoreSetOptimizer($s, undef), $KVStore::Raw::KV_ERR_NULL_POINTER,
  'an undef spec reaches the library as NULL');
is(KVStore::Raw::KVStoreSetOptimizer($s, "test(rescale_grad=1)"), 0, 'a spec without NUL is taken');

# Updater through the raw module: it gets views; a die is left in $KVStore::Raw::CALLBACK_ERROR.
my @got;
is(KVStore::Raw::KVStoreSetUpdater($s, sub { push @got, [$_[0], ref $_[1], ref $_[2]] }), 0,
  'set a code ref updater');
is(KVStore::Raw::KVStorePush($s, [2], [$h], 0), 0, 'push runs it');
is_deeply(\@got, [[2, 'KVStore::NDArray', 'KVStore::NDArray']], 'called with (key, view, view)');
is(KVStore::Raw::KVStoreSetUpdater($s, sub { die "nope\n" }), 0, 'an updater that dies');
$KVStore::Raw::CALLBACK_ERROR = undef;
is(KVStore::Raw::KVStorePush($s, [2], [$h], 0), $KVStore::Raw::KV_ERR_CALLBACK, 'push fails with CALLBACK');
is($KVStore::Raw::CALLBACK_ERROR, "nope\n", 'and the exception is kept for the caller');
is(KVStore::Raw::KVStoreSetUpdater($s, undef), 0, 'undef clears it');
is(KVStore::Raw::KVStorePush($s, [2], [$h], 0), 0, 'assign again');

# Row-sparse: int64 id lists in and out, the stype and row count out-parameters, and the
# count-checking shim of KVStoreRowSparsePull.
my ($rr, $rsp) = KVStore::Raw::KVArrayCreateRowSparse([4, 3], 0, 1, 0, [0, 2]);
is($rr, 0, 'KVArrayCreateRowSparse from an id list');
is_deeply([KVStore::Raw::KVArrayGetStorageType($rsp)], [0, $KVStore::Raw::KV_STYPE_ROW_SPARSE],
  'stype out-parameter');
is_deeply([KVStore::Raw::KVArrayGetNumRows($rsp)], [0, 2], 'num_rows out-parameter');
is_deeply([KVStore::Raw::KVArrayGetRowIds($rsp)], [0, [0, 2]], 'row ids as an array ref');
is((KVStore::Raw::KVArrayGetRowIds($h))[0], $KVStore::Raw::KV_ERR_INVALID_ARGUMENT,
  'row ids of a dense array: the library\'s INVALID_ARGUMENT');
my ($re, $empty) = KVStore::Raw::KVArrayCreateRowSparse([4, 3], 0, 1, 0, []);
is_deeply([$re, KVStore::Raw::KVArrayGetRowIds($empty)], [0, 0, []], 'no ids');
is((KVStore::Raw::KVArrayCreateRowSparse([4, 3], 0, 1, 0, [2, 0]))[0],
   $KVStore::Raw::KV_ERR_INVALID_ARGUMENT, 'ids out of order: the library refuses');
eval { KVStore::Raw::KVArrayCreateRowSparse([4, 3], 0, 1, 0, [0, 'x']) };
like($@, qr/KVArrayCreateRowSparse: row_ids\[1\] is not an integer/, 'croaks: a bad id');
eval { KVStore::Raw::KVArrayCreateRowSparse([4, 3], 0, 1, 0, 2) };
like($@, qr/KVArrayCreateRowSparse: row_ids must be an array reference/, 'croaks: ids not a list');
my ($rs2, $s2) = KVStore::Raw::KVStoreCreate('local');
my (undef, $w) = KVStore::Raw::KVArrayCreate([4, 3], 0, 1, 0);
KVStore::Raw::KVStoreInit($s2, [1], [$w]);
my (undef, $ids) = KVStore::Raw::KVArrayCreate([1], 0, 1, 0);
is(KVStore::Raw::KVStoreRowSparsePull($s2, [1], [$rsp], [$ids], 0), 0, 'KVStoreRowSparsePull');
is_deeply([KVStore::Raw::KVArrayGetRowIds($rsp)], [0, [0]], 'the output holds row 0');
eval { KVStore::Raw::KVStoreRowSparsePull($s2, [1], [$rsp], [$ids, $ids], 0) };
like($@, qr/KVStoreRowSparsePull: row_ids has 2 elements but keys has 1/, 'croaks: row_ids count');
eval { KVStore::Raw::KVStoreRowSparsePullStr($s2, ['a'], [], [$ids], 0) };
like($@, qr/KVStoreRowSparsePullStr: outs has 0 elements but keys has 1/, 'croaks: outs count');
KVStore::Raw::KVStoreFree($s2);
KVStore::Raw::KVArrayFree($_) for $w, $ids, $rsp, $empty;

# float16 helpers.
is_deeply([unpack 'S*', KVStore::Raw::kvperl_float_to_half(pack 'f*', 1, -2, 0.5, 65504)],
  [0x3c00, 0xc000, 0x3800, 0x7bff], 'float -> half bit patterns');
is_deeply([unpack 'f*', KVStore::Raw::kvperl_half_to_float(pack 'S*', 0x3c00, 0x0001, 0xfc00)],
  [1, 2**-24, -9**9**9], 'half -> float (subnormal, -inf)');

is(KVStore::Raw::KVStoreFree($s), 0, 'free the store');
is(KVStore::Raw::KVArrayFree($h), 0, 'free the array');
is(KVStore::Raw::KVArrayFree(undef), 0, 'free(NULL) is accepted');
is(KVStore::Raw::KVErrorName(-6), 'KV_ERR_SHAPE_MISMATCH', 'KVErrorName');
done_testing;
