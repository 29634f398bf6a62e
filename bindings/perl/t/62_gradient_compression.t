# set_gradient_compression: 2bit with a residual per key, worked out by hand; {type => 'none'}
# turns it off again; a local store and a bad type croak.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my @g = (0.3, 0.6, -0.7, 0.1, 0, 0.25);
my $kv = mx->kv->create('device');
$kv->set_gradient_compression({type => '2bit', threshold => 0.5});
$kv->init(0, mx->nd->zeros([2, 3]));

sub push_pull {
  my $out = mx->nd->zeros([2, 3]);
  $kv->push(0, mx->nd->array([[@g[0 .. 2]], [@g[3 .. 5]]]));
  $kv->pull(0, out => $out);
  return vals($out);
}

# r = g: 0.6 >= 0.5 sends +0.5, -0.7 <= -0.5 sends -0.5; then the residuals 0.3, 0.1, -0.2,
# 0.1, 0, 0.25 plus g: 0.6, 0.7, -0.9, 0.2, 0, 0.5.
is_deeply(push_pull(), [0, 0.5, -0.5, 0, 0, 0], 'first 2bit push');
is_deeply(push_pull(), [0.5, 0.5, -0.5, 0, 0, 0.5], 'second 2bit push: the residuals');
$kv->set_gradient_compression({type => 'none'});
my $raw = push_pull();
ok(abs($raw->[1] - 0.6) < 1e-6 && abs($raw->[2] + 0.7) < 1e-6, 'off again: the push as it is');
throws_ok(sub { $kv->set_gradient_compression({type => '3bit'}) }, 'KVStore::Error::InvalidArgument',
  [qr/3bit/], 'an unknown type');
throws_ok(sub { mx->kv->create('local')->set_gradient_compression({type => '2bit'}) },
  'KVStore::Error::NotSupported', [qr/local/], 'a local store');

done_testing();
