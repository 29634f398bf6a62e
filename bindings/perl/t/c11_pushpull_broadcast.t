# C11: pushpull returns the merged value; broadcast inits then pulls; broadcasting a key a
# second time fails.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $kv = mx->kv->create('local');
$kv->init(1, mx->nd->full([3], 10));
$kv->_set_updater(sub { my ($k, $in, $st) = @_; $st += $in });
my $out = mx->nd->zeros([3]);
$kv->pushpull(1, [mx->nd->full([3], 1), mx->nd->full([3], 2)], out => $out);
is_deeply(vals($out), filled(13, 3), 'pushpull: merged value pulled (10 + 1 + 2)');

# Without out, the values themselves receive the result.
my $g = mx->nd->full([3], 7);
$kv->pushpull(1, $g);
is_deeply(vals($g), filled(20, 3), 'pushpull without out writes the value in place');

# Lists of keys.
$kv->init([2, 3], [mx->nd->zeros([3]), mx->nd->zeros([3])]);
my @outs = (mx->nd->zeros([3]), mx->nd->zeros([3]));
$kv->pushpull([2, 3], [mx->nd->full([3], 4), mx->nd->full([3], 5)], out => \@outs);
is_deeply([vals($outs[0])->[0], vals($outs[1])->[0]], [4, 5], 'pushpull with a list of keys');

# Broadcast.
my @b = (mx->nd->zeros([2], ctx => mx->cpu(0)), mx->nd->zeros([2], ctx => mx->cpu(1)));
$kv->broadcast(9, mx->nd->array([1.5, -2]), out => \@b);
is_deeply(vals($_), [1.5, -2], 'broadcast filled the output on ' . $_->context) for @b;
my $o = mx->nd->zeros([2]);
$kv->pull(9, out => $o);
is_deeply(vals($o), [1.5, -2], 'broadcast initialised the key');
throws_ok(sub { $kv->broadcast(9, mx->nd->array([7, 7]), out => $o) }, 'KVStore::Error::DuplicateKey',
  [qr/\b9\b/], 'a second broadcast of the key fails');
$kv->pull(9, out => $o);
is_deeply(vals($o), [1.5, -2], 'and changes nothing');

# String keys.
my $skv = mx->kv->create('local');
$skv->broadcast('w', mx->nd->full([2], 3), out => $o);
is_deeply(vals($o), [3, 3], 'string-key broadcast');
$skv->pushpull('w', mx->nd->full([2], 8), out => $o);
is_deeply(vals($o), [8, 8], 'string-key pushpull (assign)');
done_testing;
