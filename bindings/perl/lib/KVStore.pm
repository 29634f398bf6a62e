package KVStore;

# Perl binding of libkvstore, shaped like the MXNet Perl API the tutorials use:
#
#   use KVStore;                                   # exports mx
#   my $kv = mx->kv->create('local');
#   my $shape = [2, 3];
#   $kv->init(3, mx->nd->ones($shape) * 2);
#   my $a = mx->nd->zeros($shape, ctx => mx->cpu(1));
#   $kv->pull(3, out => $a);
#   print $a->aspdl;
#
# mx->kv     KVStore::KV (create)            -> KVStore::Store
# mx->nd     KVStore::NDArray (zeros, ones, full, empty, array)
# mx->cpu(i), mx->gpu(i)                      -> KVStore::Context
# mx->optimizer KVStore::Optimizer (create, ::SGD->new, ...)
# Errors are KVStore::Error objects (see KVStore::Error).

use strict;
use warnings;

our $VERSION = '0.1.0';

use Exporter 'import';
our @EXPORT    = qw(mx);
our @EXPORT_OK = qw(mx);

use KVStore::Raw ();
use KVStore::Error;
use KVStore::Context;
use KVStore::NDArray;
use KVStore::Store;

# `mx->kv` parses as mx()->kv because a sub named mx is in scope.
sub mx () { 'KVStore::MX' }

# Version of the loaded library ("0.1.0") and its features.
sub library_version { KVStore::Raw::KVGetVersionString() }

sub has_feature {
  my ($class, $name) = @_;
  my %code = (cuda => $KVStore::Raw::KV_FEATURE_CUDA, nccl => $KVStore::Raw::KV_FEATURE_NCCL,
              dist => $KVStore::Raw::KV_FEATURE_DIST);
  KVStore::Error->invalid("unknown feature '" . ($name // 'undef') . "' (known: cuda, nccl, dist)")
    unless defined $name && exists $code{ lc $name };
  return KVStore::Raw::KVHasFeature($code{ lc $name }) ? 1 : 0;
}

package KVStore::MX;

sub kv       {'KVStore::KV'}
sub nd       {'KVStore::NDArray'}
sub cpu      { my ($class, $id) = @_; KVStore::Context->cpu($id) }
sub gpu      { my ($class, $id) = @_; KVStore::Context->gpu($id) }
sub Context  {'KVStore::Context'}
sub optimizer {'KVStore::Optimizer'}
sub num_gpus { KVStore::Context::num_gpus() }

package KVStore::KV;

sub create { my ($class, $type) = @_; KVStore::Store->new($type) }

1;
