package KVStore::Error;

# Exceptions of the Perl binding. Every failure of the library croaks with an object of a
# subclass named after its code (KVStore::Error::ShapeMismatch for KV_ERR_SHAPE_MISMATCH,
# ...), generated at load time from the library's own error table (KVErrorName), so the
# classes cannot drift from kvstore_errors.h. Objects stringify to the library's message.
#
#   eval { $kv->push(3, $wrong) };
#   if (ref $@ && $@->isa('KVStore::Error::ShapeMismatch')) { warn $@->message }
#
# Invalid Perl-side arguments (a shape that is not an array ref, ...) croak with a
# KVStore::Error::InvalidArgument whose message says what was wrong.

use strict;
use warnings;

use KVStore::Raw ();

use overload
  '""'     => sub { $_[0]->{message} },
  'bool'   => sub { 1 },
  fallback => 1;

our %CLASS_OF_CODE;    # -6 => 'KVStore::Error::ShapeMismatch'
our %CODE_OF_NAME;     # 'KV_ERR_SHAPE_MISMATCH' => -6

# One subclass per code of the table: codes run from -1 down until KVErrorName no longer
# knows the value.
for (my $code = -1;; --$code) {
  my $name = KVStore::Raw::KVErrorName($code);
  last if !defined $name || $name eq 'KV_ERR_UNKNOWN' || $code < -1000;
  (my $suffix = $name) =~ s/^KV_ERR_//;
  my $class = 'KVStore::Error::' . join '', map { ucfirst lc } split /_/, $suffix;
  no strict 'refs';
  @{"${class}::ISA"} = (__PACKAGE__);
  $CLASS_OF_CODE{$code} = $class;
  $CODE_OF_NAME{$name}  = $code;
}

# The first caller outside the binding, for the error's file and line.
sub _where {
  for (my $i = 1;; ++$i) {
    my ($pkg, $file, $line) = caller($i);
    return ('?', 0) unless defined $pkg;
    return ($file, $line) unless $pkg =~ /\AKVStore(?:::|\z)/;
  }
}

sub new {
  my ($class, %args) = @_;
  my $code = $args{code} // $KVStore::Raw::KV_ERR_INTERNAL;
  my ($file, $line) = _where();
  return bless {
    code    => $code,
    name    => KVStore::Raw::KVErrorName($code),
    message => $args{message} // KVStore::Raw::KVErrorName($code),
    file    => $file,
    line    => $line,
  }, $class;
}

# KVStore::Error->throw($code, $message): dies with the subclass of $code.
sub throw {
  my ($class, $code, $message) = @_;
  $class = $CLASS_OF_CODE{$code} // $class if $class eq __PACKAGE__;
  die $class->new(code => $code, message => $message);
}

# Dies with the library's last error when $rc is not 0 (KVGetLastError is read at once, on
# the thread that made the failing call).
sub check {
  my ($class, $rc) = @_;
  return if !$rc;
  my $message = KVStore::Raw::KVGetLastError();
  $message = KVStore::Raw::KVErrorName($rc) if !defined $message || $message eq '';
  __PACKAGE__->throw($rc, $message);
}

# Perl-side argument errors.
sub invalid {
  my ($class, $message) = @_;
  __PACKAGE__->throw($KVStore::Raw::KV_ERR_INVALID_ARGUMENT, $message);
}

sub code    { $_[0]->{code} }
sub name    { $_[0]->{name} }
sub message { $_[0]->{message} }
sub file    { $_[0]->{file} }
sub line    { $_[0]->{line} }

1;
