# save_optimizer_states / load_optimizer_states: resuming from a saved state is bit-identical
# to training on; a truncated file croaks with the library's message and changes nothing.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

sub job {
  my ($w0) = @_;
  my $kv = mx->kv->create('local');
  $kv->set_optimizer('adam(learning_rate=0.01)');
  $kv->init(0, mx->nd->array([[@$w0[0 .. 2]], [@$w0[3 .. 5]]]));
  return $kv;
}

sub train {
  my ($kv, $from, $to) = @_;
  for my $step ($from .. $to - 1) {
    my @g = map { sin(($_ + 1) * ($step + 1)) } 0 .. 5;
    $kv->push(0, mx->nd->array([[@g[0 .. 2]], [@g[3 .. 5]]]));
  }
}

sub weights {
  my ($kv) = @_;
  my $out = mx->nd->zeros([2, 3]);
  $kv->pull(0, out => $out);
  return vals($out);
}

my $dir = tempdir(CLEANUP => 1);
my $file = "$dir/states.kvos";
my $w0 = [1 .. 6];
my $whole = job($w0);
train($whole, 0, 5);
my $first = job($w0);
train($first, 0, 3);
$first->save_optimizer_states($file, 1);
ok(-s $file, 'the file was written');

my $second = job(weights($first));
$second->load_optimizer_states($file);
train($second, 3, 5);
is_deeply(weights($second), weights($whole), 'resumed weights bit-identical to the uninterrupted run');

open my $fh, '<:raw', $file or die "$file: $!";
my $bytes = do { local $/; <$fh> };
close $fh;
open $fh, '>:raw', $file or die "$file: $!";
print {$fh} substr($bytes, 0, length($bytes) - 1);
close $fh;
throws_ok(sub { $first->load_optimizer_states($file) }, 'KVStore::Error::InvalidArgument',
  [qr/truncated/, qr/states\.kvos/], 'a truncated file');
train($first, 3, 5);
is_deeply(weights($first), weights($whole), 'a refused load changed nothing');

my $plain = mx->kv->create('local');
throws_ok(sub { $plain->save_optimizer_states("$dir/none.kvos") }, 'KVStore::Error::NotSupported',
  [qr/no optimizer/], 'no built-in optimizer');

done_testing();
