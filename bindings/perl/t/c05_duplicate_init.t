# C5: initialising a key twice croaks; the first init's value is kept.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $kv = mx->kv->create('local');
$kv->init(3, mx->nd->full([2, 2], 1.5));
throws_ok(sub { $kv->init(3, mx->nd->full([2, 2], 9)) }, 'KVStore::Error::DuplicateKey',
  [qr/\b3\b/], 'second init of key 3');
my $out = mx->nd->zeros([2, 2]);
$kv->pull(3, out => $out);
is_deeply(vals($out), filled(1.5, 4), 'the first value is kept');

# A list naming an already initialised key fails whole: the new key is not initialised.
throws_ok(sub { $kv->init([4, 3], [mx->nd->ones([2, 2]), mx->nd->ones([2, 2])]) },
  'KVStore::Error::DuplicateKey', [qr/\b3\b/], 'list init with a duplicate');
throws_ok(sub { $kv->pull(4, out => $out) }, 'KVStore::Error::UnknownKey', [qr/\b4\b/],
  'key 4 of the failed call was not initialised');

# The same key twice in one init call is an invalid argument.
throws_ok(sub { $kv->init([8, 8], [mx->nd->ones([2, 2]), mx->nd->ones([2, 2])]) },
  'KVStore::Error::InvalidArgument', [qr/\b8\b/], 'key repeated within one init');

# String keys.
my $skv = mx->kv->create('local');
$skv->init('w', mx->nd->full([2], 2));
throws_ok(sub { $skv->init('w', mx->nd->full([2], 3)) }, 'KVStore::Error::DuplicateKey',
  [qr/w/], 'second init of string key w');
my $o = mx->nd->zeros([2]);
$skv->pull('w', out => $o);
is_deeply(vals($o), [2, 2], 'first value of w kept');
done_testing;
