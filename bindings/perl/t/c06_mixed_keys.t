# C6: int keys after string keys, and string keys after int keys, croak; unchanged.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

my $ikv = mx->kv->create('local');
$ikv->init(3, mx->nd->full([2], 4));
throws_ok(sub { $ikv->init('w', mx->nd->ones([2])) }, 'KVStore::Error::KeyKindMismatch',
  [qr/w/], 'string key in an int-key store (init)');
throws_ok(sub { $ikv->push('w', mx->nd->ones([2])) }, 'KVStore::Error::KeyKindMismatch',
  [qr/w/], 'string key in an int-key store (push)');
my $o = mx->nd->zeros([2]);
$ikv->pull(3, out => $o);
is_deeply(vals($o), [4, 4], 'int store unchanged');

my $skv = mx->kv->create('local');
$skv->init('w', mx->nd->full([2], 6));
throws_ok(sub { $skv->init(5, mx->nd->ones([2])) }, 'KVStore::Error::KeyKindMismatch',
  [qr/\b5\b/], 'int key in a string-key store (init)');
throws_ok(sub { $skv->pull(5, out => $o) }, 'KVStore::Error::KeyKindMismatch', [qr/\b5\b/],
  'int key in a string-key store (pull)');
$skv->pull('w', out => $o);
is_deeply(vals($o), [6, 6], 'string store unchanged');

# Both kinds in one call: refused before the library is called.
throws_ok(sub { $skv->push(['w', 3], [mx->nd->ones([2]), mx->nd->ones([2])]) },
  'KVStore::Error::KeyKindMismatch', [qr/'3'/, qr/'w'/], 'mixed kinds within one call');
$skv->pull('w', out => $o);
is_deeply(vals($o), [6, 6], 'still unchanged');
done_testing;
