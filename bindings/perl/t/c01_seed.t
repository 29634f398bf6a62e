# C1: the seed tutorial (shared/seeds/perl-kvstore.md). Every number it prints, exactly:
# first the example script run as a separate perl, then the same steps in-process, checked
# element by element (that part needs no PDL).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use KVTest;
use KVStore;

# What the tutorial shows after each `print ...->aspdl`, and the updater's lines.
my @expected = split /\n/, <<'OUT';
[
 [2 2 2]
 [2 2 2]
]
[
 [8 8 8]
 [8 8 8]
]
[
 [2 2 2]
 [2 2 2]
]
update on key: 3
[
 [8 8 8]
 [8 8 8]
]
[
 [8 8 8]
 [8 8 8]
]
update on key: 5
update on key: 7
update on key: 9
[
 [4 4 4]
 [4 4 4]
]
OUT

SKIP: {
  skip 'PDL is not installed (apt-get install pdl)', 2 unless have_pdl();
  my $script = ($ENV{KVSTORE_PERL_EXAMPLES} // "$FindBin::Bin/../../../examples/perl")
    . '/kvstore_tutorial.pl';
  my $out = qx{"$^X" "$script" 2>&1};
  is($?, 0, 'the tutorial script exits 0') or diag($out);
  # PDL starts each printed piddle with an empty line, which the tutorial page leaves out.
  my @got = grep { $_ ne '' } split /\n/, $out;
  is_deeply(\@got, \@expected, 'the script prints what the tutorial shows');
}

# The same steps, in-process.
my $kv = mx->kv->create('local');
my $shape = [2, 3];
$kv->init(3, mx->nd->ones($shape) * 2);
my $a = mx->nd->zeros($shape);
$kv->pull(3, out => $a);
is_deeply(vals($a), filled(2, 6), 'init then pull: 2');
is_deeply($a->shape, [2, 3], 'shape (2,3)');

$kv->push(3, mx->nd->ones($shape) * 8);
$a = mx->nd->zeros($shape);
$kv->pull(3, out => $a);
is_deeply(vals($a), filled(8, 6), 'push replaces (assign): 8');

$kv->push(3, [mx->nd->ones($shape, ctx => mx->cpu(0)), mx->nd->ones($shape, ctx => mx->cpu(1))]);
$kv->pull(3, out => $a);
is_deeply(vals($a), filled(2, 6), 'two devices summed: 2');

my @seen;
$kv->_set_updater(sub {
  my ($key, $input, $stored) = @_;
  push @seen, $key;
  $stored += $input * 3;
});
$kv->push(3, [mx->nd->ones($shape, ctx => mx->cpu(0)), mx->nd->ones($shape, ctx => mx->cpu(1))]);
is_deeply(\@seen, [3], 'updater ran once, for key 3');
$kv->pull(3, out => $a);
is_deeply(vals($a), filled(8, 6), 'updater: 2 + (1+1)*3 = 8');

my $b = [mx->nd->zeros($shape, ctx => mx->cpu(0)), mx->nd->zeros($shape, ctx => mx->cpu(1))];
$kv->pull(3, out => $b);
is_deeply(vals($b->[0]), filled(8, 6), 'pull into cpu(0): 8');
is_deeply(vals($b->[1]), filled(8, 6), 'pull into cpu(1): 8');
is($b->[1]->context->device_id, 1, 'second output lives on cpu(1)');

@seen = ();
my $keys = [5, 7, 9];
$kv->init($keys, [map { mx->nd->ones($shape) } 0 .. @$keys - 1]);
is_deeply(\@seen, [], 'the updater does not run at init');
$kv->push($keys, [map { mx->nd->ones($shape) } 0 .. @$keys - 1]);
is_deeply(\@seen, [5, 7, 9], 'update on keys 5, 7, 9 in order');
$b = [map { mx->nd->ones($shape) } 0 .. @$keys - 1];
$kv->pull($keys, out => $b);
is_deeply(vals($b->[$_]), filled(4, 6), "key $keys->[$_]: 1 + 1*3 = 4") for 0 .. 2;

SKIP: {
  skip 'PDL is not installed', 3 unless have_pdl();
  my $p = $b->[1]->aspdl;
  is($p->type . '', 'float', 'aspdl of float32 is a float piddle');
  is_deeply([$p->dims], [3, 2], 'PDL dims are the reversed shape');
  like("$p", qr/\A\s*\[\s*\[4 4 4\]\s*\[4 4 4\]\s*\]\s*\z/, 'prints as [ [4 4 4] [4 4 4] ]');
}
done_testing;
