# C2: a push whose value has the wrong shape croaks with the library's message (key and both
# shapes named) and leaves the stored value as it was.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $kv = mx->kv->create('local');
$kv->init(3, mx->nd->full([2, 3], 5));

my $err = throws_ok(sub { $kv->push(3, mx->nd->ones([3, 2])) }, 'KVStore::Error::ShapeMismatch',
  [qr/\b3\b/, qr/\(2,\s*3\)/, qr/\(3,\s*2\)/], 'push of a (3,2) value to a (2,3) key');
is($err->code, $KVStore::Raw::KV_ERR_SHAPE_MISMATCH, 'code is KV_ERR_SHAPE_MISMATCH');
is($err->name, 'KV_ERR_SHAPE_MISMATCH', 'name');
is("$err", $err->message, 'stringifies to the message');
is($err->message, KVStore::Raw::KVGetLastError(), 'the message is the library\'s');
eval { $kv->push(3, mx->nd->ones([3, 2])) }; my $line = __LINE__;
is($@->line, $line, 'the error records the caller\'s line');
is($@->file, __FILE__, 'and file');

my $out = mx->nd->zeros([2, 3]);
$kv->pull(3, out => $out);
is_deeply(vals($out), filled(5, 6), 'stored value unchanged');

# One bad value among several for the same key: nothing is applied, the updater never runs.
my $calls = 0;
$kv->_set_updater(sub { $calls++ });
throws_ok(sub { $kv->push(3, [mx->nd->ones([2, 3]), mx->nd->ones([2, 2])]) },
  'KVStore::Error::ShapeMismatch', [qr/\(2,\s*2\)/], 'one bad value among two');
is($calls, 0, 'the updater did not run');
$kv->pull(3, out => $out);
is_deeply(vals($out), filled(5, 6), 'stored value still unchanged');

# Pull into a wrong-shaped output: an error, the output untouched.
my $bad = mx->nd->full([6], 9);
throws_ok(sub { $kv->pull(3, out => $bad) }, 'KVStore::Error::ShapeMismatch', [qr/\(6\)/],
  'pull into a (6) output');
is_deeply(vals($bad), filled(9, 6), 'output untouched');
done_testing;
