# C3: a push whose value has the wrong dtype croaks naming both dtypes; stored value unchanged.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $kv = mx->kv->create('local');
$kv->init(3, mx->nd->full([2, 3], 5));
my $err = throws_ok(sub { $kv->push(3, mx->nd->ones([2, 3], dtype => 'float64')) },
  'KVStore::Error::DtypeMismatch', [qr/\b3\b/, qr/float32/, qr/float64/],
  'float64 value pushed to a float32 key');
is($err->code, $KVStore::Raw::KV_ERR_DTYPE_MISMATCH, 'code');
my $out = mx->nd->zeros([2, 3]);
$kv->pull(3, out => $out);
is_deeply(vals($out), filled(5, 6), 'stored value unchanged');

throws_ok(sub { $kv->pull(3, out => mx->nd->zeros([2, 3], dtype => 'int32')) },
  'KVStore::Error::DtypeMismatch', [qr/float32/, qr/int32/], 'pull into an int32 output');
done_testing;
