# C13: `type` is the given name lowercased; an unknown type croaks listing the valid names.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

for my $name (qw(local LOCAL Local_Update_CPU local_allreduce_cpu Device local_allreduce_device)) {
  is(mx->kv->create($name)->type, lc $name, "type of '$name'");
}
is(mx->kv->create->type, 'local', 'default type is local');
my $err = throws_ok(sub { mx->kv->create('bogus') }, 'KVStore::Error::InvalidArgument',
  [qr/bogus/, qr/local/, qr/device/, qr/dist_sync/], 'unknown type lists the valid ones');
is($err->code, $KVStore::Raw::KV_ERR_INVALID_ARGUMENT, 'code INVALID_ARGUMENT');
my $kv = mx->kv->create('local');
is($kv->rank, 0, 'rank 0');
is($kv->num_workers, 1, 'one worker');
is($kv->_barrier, $kv, '_barrier returns at once');
is($kv->num_dead_node(7, 60), 0, 'no dead nodes');
done_testing;
