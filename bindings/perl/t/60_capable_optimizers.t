# is_capable (KVStoreIsCapable) and the optimizer objects of KVStore::Optimizer.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

for my $type (qw(local device local_allreduce_cpu)) {
  my $kv = mx->kv->create($type);
  is($kv->is_capable(KVStore::Store::OPTIMIZER), 1, "$type is capable of optimizers");
  is($kv->is_capable('Optimizer'), 1, 'capability names are case-insensitive');
}
my $kv = mx->kv->create('local');
throws_ok(sub { $kv->is_capable('row_sparse') }, 'KVStore::Error::InvalidArgument',
  [qr/row_sparse/, qr/"optimizer"/], 'an unknown capability names the known ones');
throws_ok(sub { $kv->is_capable(undef) }, 'KVStore::Error::InvalidArgument', [qr/string/],
  'the capability must be a string');

my @specs = (
  [KVStore::Optimizer::SGD->new(learning_rate => 0.1, momentum => 0.9, wd => 1e-4),
   'sgd(learning_rate=0.1,momentum=0.9,wd=0.0001)'],
  [KVStore::Optimizer::SGD->new(lr => 0.5, clip_gradient => undef), 'sgd(lr=0.5)'],
  [KVStore::Optimizer::NAG->new(momentum => 1 / 3), 'nag(momentum=0.33333333333333331)'],
  [KVStore::Optimizer::Adam->new, 'adam'],
  [KVStore::Optimizer::AdaGrad->new(epsilon => 1e-6), 'adagrad(epsilon=1e-06)'],
  [KVStore::Optimizer::RMSProp->new(rho => 0.8, centered => 1, multi_precision => 0),
   'rmsprop(rho=0.8,centered=1)'],
  [KVStore::Optimizer::Test->new(rescale_grad => 2), 'test(rescale_grad=2)'],
  [mx->optimizer->create('SGD', momentum => 0.5), 'sgd(momentum=0.5)'],
);
for my $case (@specs) {
  my ($opt, $spec) = @$case;
  is($opt->spec, $spec, "spec $spec");
  is("$opt", $spec, "stringifies as $spec");
}
is($specs[0][0]->param('momentum'), 0.9, 'param reads back a value');
is($specs[0][0]->param('beta1'), undef, 'param of one not given is undef');
isa_ok($specs[0][0], 'KVStore::Optimizer');

throws_ok(sub { KVStore::Optimizer::Adam->new(momentum => 0.9) }, 'KVStore::Error::InvalidArgument',
  [qr/momentum/, qr/beta1/], 'an unknown parameter dies at construction');
throws_ok(sub { KVStore::Optimizer::SGD->new(momentum => 2) }, 'KVStore::Error::InvalidArgument',
  [qr/momentum/], 'a value out of range dies at construction');
throws_ok(sub { KVStore::Optimizer::SGD->new(momentum => 'fast') }, 'KVStore::Error::InvalidArgument',
  [qr/number/], 'a value must be a number');
throws_ok(sub { KVStore::Optimizer::SGD->new('momentum') }, 'KVStore::Error::InvalidArgument',
  [qr/pairs/], 'arguments come in pairs');
throws_ok(sub { mx->optimizer->create('adadelta') }, 'KVStore::Error::InvalidArgument',
  [qr/adadelta/, qr/sgd/], 'create of an unknown optimizer names the known ones');
throws_ok(sub { KVStore::Optimizer->new }, 'KVStore::Error::InvalidArgument', [qr/abstract/],
  'the base class is abstract');

# An object installs exactly what its spec string installs.
my @results;
for my $opt (KVStore::Optimizer::SGD->new(learning_rate => 0.1, momentum => 0.9, wd => 0.01),
             'sgd(learning_rate=0.1,momentum=0.9,wd=0.01)') {
  my $s = mx->kv->create('local');
  $s->init(3, mx->nd->ones([2, 3]));
  is($s->set_optimizer($opt), $s, 'set_optimizer returns the store');
  $s->push(3, mx->nd->full([2, 3], $_)) for (1, -2, 0.5);
  my $out = mx->nd->zeros([2, 3]);
  $s->pull(3, out => $out);
  push @results, vals($out);
}
is_deeply($results[0], $results[1], 'an object updates as its spec string does');
isnt($results[0][0], 1, 'the optimizer ran');

$kv->init('w', mx->nd->ones([2]));
$kv->set_optimizer(KVStore::Optimizer::Test->new(rescale_grad => 2));
$kv->push('w', mx->nd->full([2], 3));
my $o = mx->nd->zeros([2]);
$kv->pull('w', out => $o);
is_deeply(vals($o), [7, 7], 'the test optimizer object with string keys: 1 + 2*3');

done_testing;
