# C4: push and pull of a key that was never initialised croak naming the key; the pull's
# output is not written.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

for my $case ([int => 3, 4], [string => 'weight', 'bias']) {
  my ($kind, $known, $unknown) = @$case;
  my $kv = mx->kv->create('local');
  $kv->init($known, mx->nd->ones([2]));
  throws_ok(sub { $kv->push($unknown, mx->nd->ones([2])) }, 'KVStore::Error::UnknownKey',
    [qr/\Q$unknown\E/], "$kind keys: push of an unknown key");
  my $out = mx->nd->full([2], 7);
  throws_ok(sub { $kv->pull($unknown, out => $out) }, 'KVStore::Error::UnknownKey',
    [qr/\Q$unknown\E/], "$kind keys: pull of an unknown key");
  is_deeply(vals($out), [7, 7], "$kind keys: the pull output is not written");
  # A list with one unknown key: no output of the call is written.
  my @outs = (mx->nd->full([2], 7), mx->nd->full([2], 7));
  throws_ok(sub { $kv->pull([$known, $unknown], out => \@outs) }, 'KVStore::Error::UnknownKey',
    [qr/\Q$unknown\E/], "$kind keys: pull of a known and an unknown key");
  is_deeply([map { @{ vals($_) } } @outs], [7, 7, 7, 7], "$kind keys: neither output written");
}
done_testing;
