# C9: int keys and string keys, each in its own store, including the string-key updater.
use strict;
use warnings;
use utf8;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $ikv = mx->kv->create('local');
$ikv->init([0, -1, 2**31 - 1], [map { mx->nd->full([2], $_) } 1 .. 3]);
my @ikeys;
$ikv->_set_updater(sub { my ($k, $in, $st) = @_; push @ikeys, $k; $st += $in * 10 });
$ikv->push([0, -1, 2**31 - 1], [map { mx->nd->ones([2]) } 1 .. 3]);
is_deeply(\@ikeys, [0, -1, 2**31 - 1], 'int updater gets int keys (0, negative, INT_MAX)');
my $o = mx->nd->zeros([2]);
$ikv->pull(-1, out => $o);
is_deeply(vals($o), [12, 12], 'int key -1: 2 + 10');
ok(!ref $ikeys[0] && $ikeys[0] =~ /\A0\z/, 'keys arrive as plain numbers');

my $skv = mx->kv->create('local');
my @names = ('weight', 'layer.1/bias', 'größe', '3x');
$skv->init(\@names, [map { mx->nd->full([2], 1) } @names]);
my @skeys;
$skv->_set_updater(sub { my ($k, $in, $st) = @_; push @skeys, $k; $st += $in });
$skv->push(\@names, [map { mx->nd->full([2], 5) } @names]);
is_deeply(\@skeys, \@names, 'string updater gets the original strings (UTF-8 included)');
for my $n (@names) {
  $skv->pull($n, out => $o);
  is_deeply(vals($o), [6, 6], "string key '$n': 1 + 5");
}

# The empty string is a valid string key.
{
  my $ekv = mx->kv->create('local');
  $ekv->init(['', 'x'], [mx->nd->full([2], 1), mx->nd->full([2], 1)]);
  my @got;
  $ekv->_set_updater(sub { my ($k, $in, $st) = @_; push @got, $k; $st += $in });
  $ekv->push(['', 'x'], [mx->nd->full([2], 2), mx->nd->full([2], 3)]);
  $ekv->pull('', out => $o);
  is_deeply(vals($o), [3, 3], "string key '': 1 + 2");
  is_deeply(\@got, ['', 'x'], "string updater gets '' for the empty key");
}

# A key too large for an int is a string key (and so is refused by an int store).
throws_ok(sub { $ikv->push(2**31, mx->nd->ones([2])) }, 'KVStore::Error::KeyKindMismatch',
  [qr/2147483648/], '2**31 is a string key');
# Only canonical integers are int keys: "03" and "+3" are strings.
{
  my $kv = mx->kv->create('local');
  $kv->init(['03', '+3', '3.0'], [map { mx->nd->full([1], $_) } 1 .. 3]);
  my $one = mx->nd->zeros([1]);
  $kv->pull('+3', out => $one);
  is_deeply(vals($one), [2], '"+3" is its own string key');
  throws_ok(sub { $kv->pull(3, out => $one) }, 'KVStore::Error::KeyKindMismatch', [qr/\b3\b/],
    'while 3 is an int key');
}

# Keys must be scalars.
throws_ok(sub { $skv->push([[1]], [mx->nd->ones([2])]) }, 'KVStore::Error::InvalidArgument',
  [qr/key must be an int or a string/], 'a reference as a key');
throws_ok(sub { $skv->push(undef, mx->nd->ones([2])) }, 'KVStore::Error::InvalidArgument',
  [qr/undef/], 'undef as a key');
done_testing;
