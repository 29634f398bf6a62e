package KVTest;

# Helpers shared by the binding's tests.

use strict;
use warnings;

use Exporter 'import';
use Test::More;

our @EXPORT = qw(vals filled throws_ok have_pdl rss_kb);

# The elements of an NDArray as a flat list.
sub vals { [ $_[0]->aslist ] }

# [x, x, ...] of length n.
sub filled { my ($x, $n) = @_; [ ($x) x $n ] }

# Runs $code, expects a KVStore::Error of $class whose message matches every regex in @res.
# Returns the exception.
sub throws_ok {
  my ($code, $class, $res, $name) = @_;
  my $ok = eval { $code->(); 1 };
  my $err = $@;
  local $Test::Builder::Level = $Test::Builder::Level + 1;
  if ($ok) {
    fail("$name: no exception");
    return;
  }
  if (!(ref $err && $err->isa($class))) {
    fail("$name: expected $class, got " . (ref $err || "'$err'"));
    return $err;
  }
  my @bad = grep { "$err" !~ $_ } @$res;
  ok(!@bad, "$name: $class") or diag("message '$err' does not match @bad");
  return $err;
}

sub have_pdl { eval { require PDL::Lite; 1 } }

# Resident set size of this process in kB, from /proc/self/status.
sub rss_kb {
  open my $fh, '<', '/proc/self/status' or return;
  while (<$fh>) { return $1 if /^VmRSS:\s+(\d+)\s+kB/ }
  return;
}

1;
