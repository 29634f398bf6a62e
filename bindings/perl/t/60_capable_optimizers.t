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

# lazy_update (SGD and Adam): given as 1 or 0; the other optimizers refuse it as any parameter
# they do not have.
is(KVStore::Optimizer::SGD->new(learning_rate => 0.5, lazy_update => 0)->spec,
  'sgd(learning_rate=0.5,lazy_update=0)', 'lazy_update false');
is(KVStore::Optimizer::Adam->new(lazy_update => 1, wd => 0.1)->spec, 'adam(lazy_update=1,wd=0.1)',
  'lazy_update true');
is(mx->optimizer->create('sgd', lazy_update => '')->spec, 'sgd(lazy_update=0)',
  'any false value is 0');
for my $class (qw(NAG AdaGrad RMSProp Test)) {
  throws_ok(sub { "KVStore::Optimizer::$class"->new(lazy_update => 0) },
    'KVStore::Error::InvalidArgument', [qr/lazy_update/, qr/\Q${\ lc $class}\E/],
    "$class has no lazy_update");
}

# The 4x2 stored value after row_sparse pushes ([row, gradient] each) to ones under $opt.
sub after_row_sparse_pushes {
  my ($opt, @pushes) = @_;
  my $s = mx->kv->create('local');
  $s->init(0, mx->nd->ones([4, 2]));
  $s->set_optimizer($opt);
  $s->push(0, mx->nd->sparse->row_sparse_array([[[$_->[1], $_->[1]]], [$_->[0]]], shape => [4, 2]))
    for @pushes;
  my $out = mx->nd->zeros([4, 2]);
  $s->pull(0, out => $out);
  return [map { sprintf('%.6g', $_) } @{ vals($out) }];
}
# sgd(lr=0.5, wd=0.1), row 3 pushed with 1: 1 - 0.5*(1 + 0.1) = 0.45 there; a dense update also
# decays the rows not pushed, 1 - 0.5*0.1 = 0.95. The library's default is lazy.
my %sgd_wd = (learning_rate => 0.5, wd => 0.1);
is_deeply(after_row_sparse_pushes(KVStore::Optimizer::SGD->new(%sgd_wd, lazy_update => 1), [3, 1]),
  [1, 1, 1, 1, 1, 1, 0.45, 0.45], 'lazy sgd with wd changes the pushed row only');
is_deeply(after_row_sparse_pushes(KVStore::Optimizer::SGD->new(%sgd_wd), [3, 1]),
  [1, 1, 1, 1, 1, 1, 0.45, 0.45], 'lazy is the default');
is_deeply(after_row_sparse_pushes(KVStore::Optimizer::SGD->new(%sgd_wd, lazy_update => 0), [3, 1]),
  [0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.45, 0.45], 'dense sgd with wd decays every row');
# sgd(lr=0.5, momentum=0.9): row 1 pushed with 1 (momentum -0.5, w 0.5), then row 3: the momentum
# carried over moves row 1 again (0.5 - 0.45 = 0.05) only in a dense update.
my %sgd_mom = (learning_rate => 0.5, momentum => 0.9);
is_deeply(after_row_sparse_pushes(KVStore::Optimizer::SGD->new(%sgd_mom, lazy_update => 1), [1, 1], [3, 1]),
  [1, 1, 0.5, 0.5, 1, 1, 0.5, 0.5], 'lazy sgd: momentum stays in its row');
is_deeply(after_row_sparse_pushes(KVStore::Optimizer::SGD->new(%sgd_mom, lazy_update => 0), [1, 1], [3, 1]),
  [1, 1, 0.05, 0.05, 1, 1, 0.5, 0.5], 'dense sgd: momentum carries over');

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
