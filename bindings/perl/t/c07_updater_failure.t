# C7: an updater that dies makes the push die with that exception, and the stored value stays
# as it was (even when the updater wrote into it before dying). Also: views passed to an
# updater are detached after the call; the trampoline refuses to run Perl on a foreign thread.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use Scalar::Util qw(refaddr);
use KVTest;
use KVStore;

my $kv = mx->kv->create('local');
$kv->init(3, mx->nd->full([2, 2], 1));
my $out = mx->nd->zeros([2, 2]);

# A string exception, thrown after the updater changed $stored.
$kv->_set_updater(sub {
  my ($key, $input, $stored) = @_;
  $stored += 100;
  die "refusing key $key\n";
});
eval { $kv->push(3, mx->nd->ones([2, 2])) };
is($@, "refusing key 3\n", 'push dies with the updater\'s own message');
$kv->pull(3, out => $out);
is_deeply(vals($out), filled(1, 4), 'stored value unchanged despite the write before die');

# The library's view of the failure.
like(KVStore::Raw::KVGetLastError(), qr/\b3\b/, 'the library recorded a callback failure for key 3');

# An exception object comes back as the very same object.
{
  package My::Oops;
  sub new { bless { why => $_[1] }, $_[0] }
}
my $thrown = My::Oops->new('nan gradient');
$kv->_set_updater(sub { die $thrown });
eval { $kv->push(3, mx->nd->ones([2, 2])) };
ok(ref $@ && refaddr($@) == refaddr($thrown), 'the exception object itself reaches the caller');
is($@->{why}, 'nan gradient', 'with its contents');

# pushpull: the failure reaches the caller and the output is not written.
my $pp = mx->nd->full([2, 2], 42);
eval { $kv->pushpull(3, mx->nd->ones([2, 2]), out => $pp) };
isa_ok($@, 'My::Oops', 'pushpull dies with the updater\'s exception');
is_deeply(vals($pp), filled(42, 4), 'pushpull output not written');

# A Perl-level error inside the updater (calling a method that does not exist).
$kv->_set_updater(sub { my ($k, $in, $st) = @_; $st->no_such_method });
eval { $kv->push(3, mx->nd->ones([2, 2])) };
like($@, qr/no_such_method/, 'a runtime error in the updater reaches the caller');

# The updater may not call data functions of its own store: that error surfaces too.
$kv->_set_updater(sub { my ($k, $in, $st) = @_; $kv->pull(3, out => mx->nd->zeros([2, 2])) });
eval { $kv->push(3, mx->nd->ones([2, 2])) };
isa_ok($@, 'KVStore::Error', 'a store call from inside the updater');
$kv->pull(3, out => $out);
is_deeply(vals($out), filled(1, 4), 'still unchanged');

# After failures, a working updater works.
$kv->_set_updater(sub { my ($k, $in, $st) = @_; $st += $in });
$kv->push(3, mx->nd->full([2, 2], 2));
$kv->pull(3, out => $out);
is_deeply(vals($out), filled(3, 4), 'a good updater after bad ones: 1 + 2');

# Views are borrowed for the call only.
my ($kept_in, $kept_st);
$kv->_set_updater(sub { ($kept_in, $kept_st) = @_[1, 2]; ok($kept_st->is_view, 'stored is a view') });
$kv->push(3, mx->nd->ones([2, 2]));
throws_ok(sub { $kept_st->aslist }, 'KVStore::Error::InvalidArgument', [qr/valid only during/],
  'a view kept past the call croaks instead of touching the store');
throws_ok(sub { $kept_in + 1 }, 'KVStore::Error::InvalidArgument', [qr/valid only during/],
  'arithmetic on a kept view croaks too');
like("$kept_st", qr/no longer valid/, 'and stringifies as detached');
undef $kept_in;
undef $kept_st;
$kv->_set_updater(undef);

# Updaters must be code refs.
throws_ok(sub { $kv->_set_updater('not code') }, 'KVStore::Error::InvalidArgument',
  [qr/code reference/], '_set_updater with a string');
eval { KVStore::Raw::KVStoreSetUpdater($kv->{handle}, [1]) };
like($@, qr/KVStoreSetUpdater: the callback must be a code reference or undef/,
  'the raw wrapper checks the callback too');

# Foreign thread: the trampoline, called from a thread that does not own the interpreter,
# must not run Perl; it returns non-zero and its registration is released later, on this
# thread.
my $ran = 0;
my $code = sub { $ran++ };
my $before = KVStore::Raw::kvperl_foreign_callback_count();
my $rc = KVStore::Raw::kvperl_selftest_foreign_thread($code);
isnt($rc, 0, 'the trampoline refuses to run on a foreign thread');
is($ran, 0, 'the Perl sub did not run');
is(KVStore::Raw::kvperl_foreign_callback_count(), $before + 1, 'the refusal is counted');
is(KVStore::Raw::kvperl_drain_releases(), 1, 'its release was deferred and is drained here');
done_testing;
