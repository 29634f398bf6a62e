# Store calls beyond the tutorial: built-in optimizers, distributed-only calls on a local
# store, device stores, closing.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $kv = mx->kv->create('local');
$kv->set_optimizer(sgd => { learning_rate => 0.5 });
$kv->init(1, mx->nd->full([2], 10));
$kv->push(1, mx->nd->full([2], 2));
my $o = mx->nd->zeros([2]);
$kv->pull(1, out => $o);
is_deeply(vals($o), [9, 9], 'set_optimizer(sgd => {learning_rate => 0.5}): 10 - 0.5*2');
$kv->set_optimizer('sgd(learning_rate=0.25)');
$kv->push(1, mx->nd->full([2], 4));
$kv->pull(1, out => $o);
is_deeply(vals($o), [8, 8], 'set_optimizer with a spec string: 9 - 0.25*4');
throws_ok(sub { $kv->set_optimizer('warp(speed=9)') }, 'KVStore::Error::InvalidArgument',
  [qr/warp/, qr/sgd/], 'unknown optimizer lists the known ones');
throws_ok(sub { $kv->set_optimizer(sgd => [1]) }, 'KVStore::Error::InvalidArgument',
  [qr/hash ref/], 'parameters must be a hash ref');

throws_ok(sub { $kv->set_barrier_before_exit(1) }, 'KVStore::Error::NotSupported', [qr/local/],
  'set_barrier_before_exit on a local store');
throws_ok(sub { $kv->send_command_to_servers(1, 'x') }, 'KVStore::Error::NotSupported',
  [qr/local/], 'send_command_to_servers on a local store');
is($kv->wait_all, $kv, 'wait_all returns at once');

# run_server needs a distributed store; the controller's reference is released either way.
{
  require B;
  my $controller = sub { 0 };
  my $before = B::svref_2object($controller)->REFCNT;
  throws_ok(sub { $kv->run_server($controller) }, 'KVStore::Error', [qr/./],
    'run_server on a local store');
  is(B::svref_2object($controller)->REFCNT, $before, 'the controller reference is released');
  throws_ok(sub { $kv->run_server('x') }, 'KVStore::Error::InvalidArgument',
    [qr/code reference/], 'run_server with a non-code controller');
}

my $dev = mx->kv->create('device');
$dev->init('w', mx->nd->zeros([3]));
$dev->push('w', [map { mx->nd->full([3], $_, ctx => mx->cpu($_)) } 1 .. 3]);
$dev->pull('w', out => $o = mx->nd->zeros([3]));
is_deeply(vals($o), [6, 6, 6], 'device store sums values from three contexts');

$dev->close;
$dev->close;    # a second close does nothing
throws_ok(sub { $dev->push('w', mx->nd->zeros([3])) }, 'KVStore::Error::NullPointer',
  [qr/closed/], 'push on a closed store');
done_testing;
