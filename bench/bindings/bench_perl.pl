#!/usr/bin/perl
# bench_perl.pl - the Perl side of the bindings bench (bench/bindings/run.py runs it with
# PERL5LIB=bindings/perl/lib:<build>/bindings/perl/lib).
#
# The cells of bench_bindings_c.c, through KVStore::Store, with the same protocol: a "local"
# store holding key 0 and keys 1..100 of 4 float32 each; push1/pull1 per call,
# push100/pull100 one call of 100 keys, per key; --reps rounds of about --seconds of calls per
# cell, cells in turn, after a warm-up. Prints one JSON object: {"lang": "perl", ...}.
use strict;
use warnings;

use Getopt::Long;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);

use KVStore;

my ($reps, $seconds) = (7, 0.2);
GetOptions('reps=i' => \$reps, 'seconds=f' => \$seconds) or die "usage: $0 [--reps N] [--seconds S]\n";

my $NKEYS = 100;
my $store = mx->kv->create('local');
my $one = mx->nd->ones([4]);
my @many = map { mx->nd->ones([4]) } 1 .. $NKEYS;
my @keys = 1 .. $NKEYS;
$store->init(0, $one);
$store->init(\@keys, \@many);

# Nanoseconds per run of $cell over about $secs (the batch grown to a tenth first).
sub time_cell {
  my ($cell, $secs) = @_;
  my ($calls, $t) = (16);
  for (;;) {
    my $t0 = clock_gettime(CLOCK_MONOTONIC);
    $cell->() for 1 .. $calls;
    $t = clock_gettime(CLOCK_MONOTONIC) - $t0;
    last if $t >= $secs / 10;
    $calls *= 4;
  }
  my $n = int($calls * $secs / $t) || 1;
  my $t0 = clock_gettime(CLOCK_MONOTONIC);
  $cell->() for 1 .. $n;
  return (clock_gettime(CLOCK_MONOTONIC) - $t0) / $n * 1e9;
}

my @names = qw(push1 pull1 push100 pull100);
my @cells = (
  sub { $store->push(0, $one) },
  sub { $store->pull(0, out => $one) },
  sub { $store->push(\@keys, \@many) },
  sub { $store->pull(\@keys, out => \@many) },
);
time_cell($_, $seconds / 4) for @cells;
my @figures = map { [] } @cells;
for my $r (1 .. $reps) {
  for my $c (0 .. $#cells) {
    CORE::push @{$figures[$c]}, time_cell($cells[$c], $seconds) / ($c < 2 ? 1 : $NKEYS);
  }
}
print '{"lang": "perl"', (map { sprintf(', "%s": [%s]', $names[$_],
  join(', ', map { sprintf '%.2f', $_ } @{$figures[$_]})) } 0 .. $#cells), "}\n";
$store->close;
