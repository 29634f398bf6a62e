# The module loads, exports mx, and reaches the library.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";

BEGIN { use_ok('KVStore') or BAIL_OUT('KVStore does not load: is PERL5LIB set to lib/ and the build?') }
can_ok('main', 'mx');
is(KVStore::Raw::KVGetVersion(), $KVStore::Raw::KVSTORE_VERSION_NUMBER,
   'library version matches the header the module was built from');
like(KVStore->library_version, qr/\A\d+\.\d+\.\d+\z/, 'version string');
for my $f (qw(cuda nccl dist)) {
  like(KVStore->has_feature($f), qr/\A[01]\z/, "has_feature($f) is 0 or 1");
}
eval { KVStore->has_feature('warp') };
like("$@", qr/unknown feature 'warp'/, 'unknown feature croaks');
is(mx->kv, 'KVStore::KV', 'mx->kv');
is(mx->nd, 'KVStore::NDArray', 'mx->nd');
is('' . mx->cpu(1), 'cpu(1)', 'mx->cpu(1)');
is('' . mx->gpu(2), 'gpu(2)', 'mx->gpu(2)');
ok(mx->cpu(1) == mx->cpu(1) && mx->cpu(1) != mx->cpu(0), 'context equality');
my ($rc, $n) = KVStore::Raw::KVGetGpuCount();
is($rc, 0, 'KVGetGpuCount succeeds');
is(mx->num_gpus, $n, 'num_gpus');
isa_ok(mx->kv->create('local'), 'KVStore::Store');
done_testing;
