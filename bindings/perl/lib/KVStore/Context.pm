package KVStore::Context;

# A device context: cpu(i) or gpu(i).
#
#   my $c = mx->cpu(1);   "$c" eq 'cpu(1)'
#
# GPU contexts on a machine without a GPU. When the library reports no usable GPU
# (KVGetGpuCount is 0), arrays created with gpu(i) are created on cpu(i), so the tutorials'
# multi-device code runs unchanged; a warning says so once per process. Set
# $KVStore::Context::GPU_AS_CPU = 0 to get the library's DEVICE error instead.

use strict;
use warnings;

use KVStore::Raw ();
use KVStore::Error;

use overload
  '""'     => sub { "$_[0]{device_type}($_[0]{device_id})" },
  '=='     => sub { _same(@_) },
  'eq'     => sub { _same(@_) },
  '!='     => sub { !_same(@_) },
  'ne'     => sub { !_same(@_) },
  'bool'   => sub { 1 },
  fallback => 1;

our $GPU_AS_CPU = 1;
my $warned_gpu_as_cpu;
my %CODE = (cpu => $KVStore::Raw::KV_CPU, gpu => $KVStore::Raw::KV_GPU);
my %NAME = reverse %CODE;

sub new {
  my ($class, $type, $id) = @_;
  $id //= 0;
  KVStore::Error->invalid("device type must be 'cpu' or 'gpu', got '" . ($type // 'undef') . "'")
    unless defined $type && !ref $type && exists $CODE{$type};
  KVStore::Error->invalid("device id must be a non-negative integer, got '$id'")
    unless !ref $id && $id =~ /\A[0-9]+\z/ && $id <= 2**31 - 1;
  return bless { device_type => $type, device_id => 0 + $id }, ref $class || $class;
}

sub cpu { my ($class, $id) = @_; return $class->new('cpu', $id) }
sub gpu { my ($class, $id) = @_; return $class->new('gpu', $id) }

# From the library's (dev_type, dev_id).
sub _from_codes {
  my ($class, $type, $id) = @_;
  return $class->new($NAME{$type} // 'cpu', $id);
}

sub device_type    { $_[0]{device_type} }
sub device_id      { $_[0]{device_id} }
sub device_type_id { $CODE{ $_[0]{device_type} } }

# Number of GPUs the library can use (0 without CUDA or without a device).
sub num_gpus {
  my ($rc, $n) = KVStore::Raw::KVGetGpuCount();
  KVStore::Error->check($rc);
  return $n;
}

# The (dev_type, dev_id) codes an array is really created with (see GPU_AS_CPU above).
sub _placement {
  my ($self) = @_;
  if ($self->{device_type} eq 'gpu' && $GPU_AS_CPU && num_gpus() == 0) {
    warn "KVStore: no GPU available; gpu($self->{device_id}) runs as cpu($self->{device_id})\n"
      unless $warned_gpu_as_cpu++;
    return ($KVStore::Raw::KV_CPU, $self->{device_id});
  }
  return ($CODE{ $self->{device_type} }, $self->{device_id});
}

sub _same {
  my ($a, $b) = @_;
  return ref $b && eval { $b->isa(__PACKAGE__) }
    && $a->{device_type} eq $b->{device_type} && $a->{device_id} == $b->{device_id};
}

1;
