# C8: a stateful updater (an object counting calls and keeping per-key state across pushes)
# gives the expected sequence.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

# Momentum SGD kept in Perl: v = mu*v + g; w -= lr*v, state per key.
{
  package Momentum;
  sub new { my ($class, %a) = @_; bless { %a, calls => 0, log => [], v => {} }, $class }
  sub updater {
    my ($self) = @_;
    return sub {
      my ($key, $grad, $weight) = @_;
      $self->{calls}++;
      push @{ $self->{log} }, $key;
      my $v = $self->{v}{$key} //= KVStore::NDArray->zeros($weight->shape);
      $v *= $self->{mu};
      $v += $grad;
      $weight -= $v * $self->{lr};
    };
  }
}

my $kv = mx->kv->create('local');
my $m = Momentum->new(lr => 0.5, mu => 0.5);
$kv->_set_updater($m->updater);
$kv->init([1, 2], [mx->nd->full([3], 10), mx->nd->full([3], 20)]);
my $w = mx->nd->zeros([3]);

my @want1 = (9, 7.5, 5.75);    # key 1, gradient 2 each push: v = 2, 3, 3.5
for my $step (0 .. 2) {
  $kv->push(1, mx->nd->full([3], 2));
  $kv->pull(1, out => $w);
  is_deeply(vals($w), filled($want1[$step], 3), "key 1 after push " . ($step + 1));
}
# Key 2 has its own state: its first push starts from v = 0.
$kv->push(2, [mx->nd->full([3], 1), mx->nd->full([3], 3)]);    # summed gradient 4
$kv->pull(2, out => $w);
is_deeply(vals($w), filled(18, 3), 'key 2: own state, summed gradient');
is($m->{calls}, 4, 'four updater calls');
is_deeply($m->{log}, [1, 1, 1, 2], 'call sequence');
is_deeply(vals($m->{v}{1}), filled(3.5, 3), 'key 1 momentum kept across pushes');
is_deeply(vals($m->{v}{2}), filled(4, 3), 'key 2 momentum');

# A list push runs the updater once per key, in order.
$kv->push([2, 1], [mx->nd->zeros([3]), mx->nd->zeros([3])]);
is_deeply([@{ $m->{log} }[4, 5]], [2, 1], 'list push: one call per key, in list order');
done_testing;
