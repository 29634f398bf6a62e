package KVStore::NDArray;

# An n-dimensional array of the library (row-major, one dtype, one device context).
#
#   my $a = mx->nd->ones([2, 3]) * 2;                       # float32 on cpu(0)
#   my $b = mx->nd->zeros([2, 3], ctx => mx->cpu(1), dtype => 'float64');
#   $b += $a->astype('float64');  print $b->aspdl;
#
# Ownership: an object made here owns its library array and frees it in DESTROY, i.e. as
# soon as the last Perl reference goes away. Objects that an updater receives (its $input and
# $stored) are views: they borrow the store's arrays, are never freed by Perl, and are
# detached when the updater returns (using one later croaks instead of touching freed
# memory). Assignment shares the object (`$b = $a; $b += 1` changes $a as well), which is
# what makes `$stored += ...` inside an updater write the store.
#
# dtypes: float32 (default), float64, float16, uint8, int32, int64.
# Storage: dense, or row_sparse (KVStore::NDArray::RowSparse, made by mx->nd->sparse and
# tostype('row_sparse')).

use strict;
use warnings;

use Scalar::Util qw(blessed looks_like_number refaddr);

use KVStore::Raw ();
use KVStore::Error;
use KVStore::Context;

# The dtype table. By name: the pack() letter of the host representation (float16 travels as
# float32, converted to and from the stored bit patterns by the binding's one float16
# conversion, to_stored/from_stored), the PDL type of aspdl (PDL has no half type: float16
# comes out as float), for integers the range enforced before packing (pack would wrap
# silently), and the KVDType code, which comes from the library: every code in [0, 16) that
# KVDTypeName names.
# A dtype the library does not name is dropped; one this table lacks is not offered.
my %DTYPE = (
  float32 => {pack => 'f', pdl => 'float'},
  float64 => {pack => 'd', pdl => 'double'},
  float16 => {pack => 'f', pdl => 'float', to_stored => \&KVStore::Raw::kvperl_float_to_half,
              from_stored => \&KVStore::Raw::kvperl_half_to_float},
  uint8   => {pack => 'C', pdl => 'byte',     range => [0, 255]},
  int32   => {pack => 'l', pdl => 'long',     range => [-2**31, 2**31 - 1]},
  int64   => {pack => 'q', pdl => 'longlong',
              range => [-9223372036854775808, 9223372036854775807]},
);
my %DTYPE_NAME;
for my $code (0 .. 15) {
  my $name = KVStore::Raw::KVDTypeName($code);
  next unless defined $name && $DTYPE{$name};
  $DTYPE{$name}{code} = $code;
  $DTYPE_NAME{$code} = $name;
}
delete @DTYPE{grep { !defined $DTYPE{$_}{code} } keys %DTYPE};

# Packed host values of $dtype <-> the bytes the library stores (they differ for float16 only).
sub _to_stored {
  my ($dtype, $bytes) = @_;
  my $convert = $DTYPE{$dtype}{to_stored};
  return $convert ? $convert->($bytes) : $bytes;
}

sub _from_stored {
  my ($dtype, $bytes) = @_;
  my $convert = $DTYPE{$dtype}{from_stored};
  return $convert ? $convert->($bytes) : $bytes;
}
# dtype of array() for a PDL input, by PDL type name.
my %DTYPE_OF_PDL = (float => 'float32', double => 'float64', byte => 'uint8', long => 'int32',
                    longlong => 'int64');

my %OP = (add => $KVStore::Raw::KV_OP_ADD, sub => $KVStore::Raw::KV_OP_SUB,
          mul => $KVStore::Raw::KV_OP_MUL, div => $KVStore::Raw::KV_OP_DIV);
my %OP_SYMBOL = (add => '+', sub => '-', mul => '*', div => '/');

use overload
  '+'      => sub { $_[0]->_binary('add', $_[1], $_[2]) },
  '-'      => sub { $_[0]->_binary('sub', $_[1], $_[2]) },
  '*'      => sub { $_[0]->_binary('mul', $_[1], $_[2]) },
  '/'      => sub { $_[0]->_binary('div', $_[1], $_[2]) },
  '+='     => sub { $_[0]->_inplace('add', $_[1]) },
  '-='     => sub { $_[0]->_inplace('sub', $_[1]) },
  '*='     => sub { $_[0]->_inplace('mul', $_[1]) },
  '/='     => sub { $_[0]->_inplace('div', $_[1]) },
  'neg'    => sub { $_[0]->_binary('sub', 0, 1) },
  '""'     => sub { $_[0]->_describe },
  'bool'   => sub { 1 },
  '='      => sub { $_[0] },
  '=='     => sub { _same_array($_[0], $_[1]) },
  'eq'     => sub { _same_array($_[0], $_[1]) },
  '!='     => sub { !_same_array($_[0], $_[1]) },
  'ne'     => sub { !_same_array($_[0], $_[1]) },
  fallback => 1;

# == and eq: the same library array (an updater's view equals nothing once detached).
sub _same_array {
  my ($x, $y) = @_;
  return '' unless blessed $y && $y->isa(__PACKAGE__);
  return refaddr($x) == refaddr($y) if !defined $x->{handle} || !defined $y->{handle};
  return ${ $x->{handle} } == ${ $y->{handle} };
}

# ---------------------------------------------------------------------------------------
# Construction

sub _options {
  my ($what, @rest) = @_;
  KVStore::Error->invalid("$what: options must be name => value pairs") if @rest % 2;
  my %o = @rest;
  for my $k (keys %o) {
    KVStore::Error->invalid("$what: unknown option '$k' (known: ctx, dtype)")
      unless $k eq 'ctx' || $k eq 'dtype';
  }
  my $dtype = $o{dtype} // 'float32';
  KVStore::Error->invalid("$what: unknown dtype '$dtype' (known: "
      . join(', ', sort keys %DTYPE) . ')')
    unless !ref $dtype && exists $DTYPE{$dtype};
  my $ctx = $o{ctx} // KVStore::Context->cpu(0);
  KVStore::Error->invalid("$what: ctx must be a context such as mx->cpu(0), got '$ctx'")
    unless blessed $ctx && $ctx->isa('KVStore::Context');
  return ($dtype, $ctx);
}

sub _shape_arg {
  my ($what, $shape) = @_;
  $shape = [$shape] if defined $shape && !ref $shape && $shape =~ /\A[0-9]+\z/;
  KVStore::Error->invalid("$what: shape must be an array ref of non-negative integers, got "
      . _show($shape))
    unless ref $shape eq 'ARRAY' && !grep { !defined || ref || !/\A[0-9]+\z/ } @$shape;
  return [map { 0 + $_ } @$shape];
}

# A new owning object around a fresh library array.
sub _create {
  my ($class, $shape, $dtype, $ctx) = @_;
  my ($rc, $h) = KVStore::Raw::KVArrayCreate($shape, $DTYPE{$dtype}{code}, $ctx->_placement);
  KVStore::Error->check($rc);
  return bless { handle => $h }, ref $class || $class;
}

sub empty {
  my ($class, $shape, @opt) = @_;
  return $class->_create(_shape_arg('empty', $shape), _options('empty', @opt));
}

sub zeros {
  my ($class, $shape, @opt) = @_;
  return $class->_create(_shape_arg('zeros', $shape), _options('zeros', @opt));
}

sub ones {
  my ($class, $shape, @opt) = @_;
  return $class->_create(_shape_arg('ones', $shape), _options('ones', @opt))->fill(1);
}

sub full {
  my ($class, $shape, $value, @opt) = @_;
  KVStore::Error->invalid("full: the fill value must be a number, got '" . ($value // 'undef')
      . "'")
    unless _is_number($value);
  my $self = $class->_create(_shape_arg('full', $shape), _options('full', @opt));
  $self->fill($value);
  return $self;
}

# From nested array refs, a plain number (rank 0), or a PDL piddle (whose dims are reversed
# into row-major order; its type gives the default dtype).
sub array {
  my ($class, $data, @opt) = @_;
  if (blessed $data && $data->isa('PDL')) {
    my $default = $DTYPE_OF_PDL{ '' . $data->type } // 'float32';
    my ($dtype, $ctx) = _options('array', dtype => $default, @opt);
    my $self = $class->_create([reverse $data->dims], $dtype, $ctx);
    my $p = $data->convert(PDL::Type->new($DTYPE{$dtype}{pdl}))->copy;
    my $bytes = ${ $p->get_dataref };
    $self->_from_bytes(_to_stored($dtype, $bytes));
    return $self;
  }
  my ($dtype, $ctx) = _options('array', @opt);
  my (@shape, @flat);
  _flatten('array', $data, 0, \@shape, \@flat);
  my $self = $class->_create(\@shape, $dtype, $ctx);
  $self->_from_bytes(_pack($dtype, \@flat));
  return $self;
}

sub _flatten {
  my ($what, $data, $depth, $shape, $flat) = @_;
  if (ref $data eq 'ARRAY') {
    if (@$shape <= $depth) {
      KVStore::Error->invalid("$what: data is ragged at depth $depth") if $depth > @$shape;
      push @$shape, scalar @$data;
      # An empty list fixes the remaining dims at its depth.
    }
    elsif ($shape->[$depth] != @$data) {
      KVStore::Error->invalid("$what: data is ragged: a list of $shape->[$depth] elements and "
          . "one of " . scalar(@$data) . " at depth $depth");
    }
    _flatten($what, $_, $depth + 1, $shape, $flat) for @$data;
    return;
  }
  KVStore::Error->invalid("$what: data is ragged at depth $depth") if $depth != @$shape;
  KVStore::Error->invalid("$what: element '" . ($data // 'undef') . "' is not a number")
    unless _is_number($data);
  push @$flat, $data;
}

sub _pack {
  my ($dtype, $values) = @_;
  if (my $range = $DTYPE{$dtype}{range}) {
    for my $v (@$values) {
      KVStore::Error->invalid("value $v is out of range for $dtype")
        if $v < $range->[0] || $v > $range->[1] || $v != $v;
    }
  }
  return _to_stored($dtype, pack "$DTYPE{$dtype}{pack}*", @$values);
}

# ---------------------------------------------------------------------------------------
# Handle, lifetime

# The library handle; croaks for a view used after its updater returned.
sub handle {
  my ($self) = @_;
  my $h = $self->{handle};
  return $h if defined $h;
  KVStore::Error->invalid('this NDArray was passed to an updater and is valid only during '
      . 'that call');
}

sub is_view { $_[0]{view} ? 1 : 0 }

sub DESTROY {
  my ($self) = @_;
  return if $self->{view};
  my $h = delete $self->{handle};
  KVStore::Raw::KVArrayFree($h) if defined $h;
}

# Objects are not copied into new Perl threads (the copy would free the array twice).
sub CLONE_SKIP { 1 }

# ---------------------------------------------------------------------------------------
# Properties

sub shape {
  my ($self) = @_;
  my ($rc, $dims) = KVStore::Raw::KVArrayGetShape($self->handle);
  KVStore::Error->check($rc);
  return $dims;
}

sub ndim { scalar @{ $_[0]->shape } }

sub size {
  my ($self) = @_;
  my ($rc, $n) = KVStore::Raw::KVArrayGetSize($self->handle);
  KVStore::Error->check($rc);
  return $n;
}

sub dtype {
  my ($self) = @_;
  my ($rc, $code) = KVStore::Raw::KVArrayGetDType($self->handle);
  KVStore::Error->check($rc);
  return $DTYPE_NAME{$code} // "dtype($code)";
}

sub context {
  my ($self) = @_;
  my ($rc, $type, $id) = KVStore::Raw::KVArrayGetContext($self->handle);
  KVStore::Error->check($rc);
  return KVStore::Context->_from_codes($type, $id);
}

sub _describe {
  my ($self) = @_;
  return '<KVStore::NDArray (updater view, no longer valid)>' unless defined $self->{handle};
  return '<KVStore::NDArray ' . join('x', @{ $self->shape }) . ' @' . $self->context . '>';
}

# ---------------------------------------------------------------------------------------
# Data in and out

# The raw bytes of the array as the library stores them (float16: bit patterns).
sub tobytes {
  my ($self) = @_;
  my ($rc, $bytes) = KVStore::Raw::KVArrayCopyToHost($self->handle);
  KVStore::Error->check($rc);
  return $bytes;
}

sub _from_bytes {
  my ($self, $bytes) = @_;
  KVStore::Error->check(KVStore::Raw::KVArrayCopyFromHost($self->handle, $bytes));
  return $self;
}

# Replaces the contents: nested array refs / a flat array ref of `size` numbers / a PDL.
sub set {
  my ($self, $data) = @_;
  my $dtype = $self->dtype;
  if (blessed $data && $data->isa('PDL')) {
    my $src = __PACKAGE__->array($data, dtype => $dtype);
    KVStore::Error->check(KVStore::Raw::KVArrayCopy($self->handle, $src->handle));
    return $self;
  }
  my (@shape, @flat);
  _flatten('set', $data, 0, \@shape, \@flat);
  KVStore::Error->invalid('set: ' . scalar(@flat) . ' values for an array of ' . $self->size
      . ' elements')
    if @flat != $self->size;
  return $self->_from_bytes(_pack($dtype, \@flat));
}

# The elements as a flat list of Perl numbers, row-major.
sub aslist {
  my ($self) = @_;
  my $dtype = $self->dtype;
  my $bytes = _from_stored($dtype, $self->tobytes);
  return unpack "$DTYPE{$dtype}{pack}*", $bytes;
}

# Nested array refs of the shape (a plain number for rank 0).
sub asarray {
  my ($self) = @_;
  my @v = $self->aslist;
  my @shape = @{ $self->shape };
  return $v[0] unless @shape;
  for my $d (reverse @shape[1 .. $#shape]) {
    my @rows;
    push @rows, [splice @v, 0, $d] while @v;
    @v = @rows;
  }
  return [@v];
}

sub asscalar {
  my ($self) = @_;
  KVStore::Error->invalid('asscalar: the array has ' . $self->size . ' elements, not 1')
    unless $self->size == 1;
  return ($self->aslist)[0];
}

# A PDL piddle with the values: float for float32 (and float16), double for float64, byte,
# long, longlong; dims reversed from the row-major shape, so a (2,3) array prints as
# [ [a b c] [d e f] ].
sub aspdl {
  my ($self) = @_;
  eval { require PDL::Lite; 1 }
    or KVStore::Error->throw($KVStore::Raw::KV_ERR_NOT_SUPPORTED,
      'aspdl needs PDL (Debian package pdl)');
  my $dtype = $self->dtype;
  my $bytes = _from_stored($dtype, $self->tobytes);
  my $p = PDL->new_from_specification(PDL::Type->new($DTYPE{$dtype}{pdl}),
                                      reverse @{ $self->shape });
  ${ $p->get_dataref } = $bytes;
  $p->upd_data;
  return $p;
}

# ---------------------------------------------------------------------------------------
# Rows along the first axis. The C ABI has no views, so at and slice return copies (a new
# array on the same context) and set_row writes through a host copy of the whole array.
# Negative indices count from the end.

# (rows, bytes per row, shape of one row); croaks for a 0-d array.
sub _rows_of {
  my ($self, $what) = @_;
  my $shape = $self->shape;
  KVStore::Error->invalid("$what: a 0-d NDArray has no rows") unless @$shape;
  my $bytes = length $self->tobytes;
  return ($shape->[0], $shape->[0] ? $bytes / $shape->[0] : 0, [@$shape[1 .. $#$shape]]);
}

sub _row_index {
  my ($what, $n, $i) = @_;
  KVStore::Error->invalid("$what: the row index must be an integer, got " . _show($i))
    unless defined $i && !ref $i && $i =~ /\A-?[0-9]+\z/;
  KVStore::Error->invalid("$what: row $i is out of range for axis 0 of size $n")
    unless $i >= -$n && $i < $n;
  return $i < 0 ? $i + $n : $i;
}

# A copy of row $i, of shape shape[1..] (a 1-d array's row is a 0-d array).
sub at {
  my ($self, $i) = @_;
  my ($n, $row_bytes, $row_shape) = $self->_rows_of('at');
  my $r = _row_index('at', $n, $i);
  my $out = __PACKAGE__->_create($row_shape, $self->dtype, $self->context);
  $out->_from_bytes(substr($self->tobytes, $r * $row_bytes, $row_bytes)) if $row_bytes;
  return $out;
}

# A copy of rows [$begin, $end) ($end defaults to the number of rows; both clipped to the
# array, as a Python slice).
sub slice {
  my ($self, $begin, $end) = @_;
  my ($n, $row_bytes, $row_shape) = $self->_rows_of('slice');
  my @b;
  for my $x ($begin // 0, $end // $n) {
    KVStore::Error->invalid('slice: bounds must be integers, got ' . _show($x))
      unless !ref $x && $x =~ /\A-?[0-9]+\z/;
    my $v = $x < 0 ? $x + $n : $x;
    push @b, $v < 0 ? 0 : $v > $n ? $n : $v;
  }
  my ($b, $e) = ($b[0], $b[1] < $b[0] ? $b[0] : $b[1]);
  my $out = __PACKAGE__->_create([$e - $b, @$row_shape], $self->dtype, $self->context);
  $out->_from_bytes(substr($self->tobytes, $b * $row_bytes, ($e - $b) * $row_bytes))
    if $row_bytes && $e > $b;
  return $out;
}

# Writes $value into row $i: a number (every element), an NDArray of the row's shape and this
# dtype, or array refs / a PDL as set() takes them. Checked before anything is written.
sub set_row {
  my ($self, $i, $value) = @_;
  my ($n, $row_bytes, $row_shape) = $self->_rows_of('set_row');
  my $r = _row_index('set_row', $n, $i);
  my $row = __PACKAGE__->_create($row_shape, $self->dtype, KVStore::Context->cpu(0));
  if (blessed $value && $value->isa(__PACKAGE__)) {
    KVStore::Error->check(KVStore::Raw::KVArrayCopy($row->handle, $value->handle));
  } elsif (_is_number($value)) {
    $row->fill($value);
  } else {
    $row->set($value);
  }
  my $bytes = $self->tobytes;
  substr($bytes, $r * $row_bytes, $row_bytes) = $row->tobytes if $row_bytes;
  return $self->_from_bytes($bytes);
}

# ---------------------------------------------------------------------------------------
# Copies, fill, arithmetic

sub fill {
  my ($self, $value) = @_;
  KVStore::Error->invalid("fill: value must be a number, got '" . ($value // 'undef') . "'")
    unless _is_number($value);
  KVStore::Error->check(KVStore::Raw::KVArrayFill($self->handle, 0 + $value));
  return $self;
}

# A new array like this one (shape, dtype; context unless given).
sub _like {
  my ($self, %o) = @_;
  return __PACKAGE__->_create($self->shape, $o{dtype} // $self->dtype,
                              $o{ctx} // $self->context);
}

sub copy {
  my ($self) = @_;
  my $out = $self->_like;
  KVStore::Error->check(KVStore::Raw::KVArrayCopy($out->handle, $self->handle));
  return $out;
}

# copyto($other_array) copies into it; copyto($context) returns a copy on that device.
sub copyto {
  my ($self, $target) = @_;
  if (blessed $target && $target->isa('KVStore::Context')) {
    my $out = $self->_like(ctx => $target);
    KVStore::Error->check(KVStore::Raw::KVArrayCopy($out->handle, $self->handle));
    return $out;
  }
  KVStore::Error->invalid('copyto: target must be an NDArray or a context')
    unless blessed $target && $target->isa(__PACKAGE__);
  KVStore::Error->check(KVStore::Raw::KVArrayCopy($target->handle, $self->handle));
  return $target;
}

sub as_in_context {
  my ($self, $ctx) = @_;
  return $self if $self->context == $ctx;
  return $self->copyto($ctx);
}

# A copy converted to another dtype (through the host).
sub astype {
  my ($self, $dtype) = @_;
  my ($d) = _options('astype', dtype => $dtype);
  return $self->copy if $d eq $self->dtype;
  my $out = $self->_like(dtype => $d);
  $out->_from_bytes(_pack($d, [$self->aslist]));
  return $out;
}

sub wait_to_read {
  my ($self) = @_;
  KVStore::Error->check(KVStore::Raw::KVArrayWaitToRead($self->handle));
  return $self;
}

sub _show {
  my ($v) = @_;
  return 'undef' unless defined $v;
  return '[' . join(', ', map { _show($_) } @$v) . ']' if ref $v eq 'ARRAY';
  return "'$v'";
}

sub _is_number {
  my ($v) = @_;
  return defined $v && !ref $v && looks_like_number($v) && $v !~ /\A\s*\z/;
}

sub _binary {
  my ($self, $op, $other, $swapped) = @_;
  my $out = $self->_like;
  if (blessed $other && $other->isa(__PACKAGE__)) {
    my ($a, $b) = $swapped ? ($other, $self) : ($self, $other);
    KVStore::Error->check(
      KVStore::Raw::KVArrayBinary($OP{$op}, $a->handle, $b->handle, $out->handle));
  }
  elsif (_is_number($other)) {
    if ($swapped) {    # scalar OP array: fill a full array with the scalar first
      $out->fill($other);
      KVStore::Error->check(
        KVStore::Raw::KVArrayBinary($OP{$op}, $out->handle, $self->handle, $out->handle));
    }
    else {
      KVStore::Error->check(
        KVStore::Raw::KVArrayBinaryScalar($OP{$op}, $self->handle, 0 + $other, $out->handle));
    }
  }
  else {
    KVStore::Error->invalid("cannot apply '$OP_SYMBOL{$op}' to an NDArray and '"
        . ($other // 'undef') . "'");
  }
  return $out;
}

sub _inplace {
  my ($self, $op, $other) = @_;
  if (blessed $other && $other->isa(__PACKAGE__)) {
    KVStore::Error->check(
      KVStore::Raw::KVArrayBinary($OP{$op}, $self->handle, $other->handle, $self->handle));
  }
  elsif (_is_number($other)) {
    KVStore::Error->check(
      KVStore::Raw::KVArrayBinaryScalar($OP{$op}, $self->handle, 0 + $other, $self->handle));
  }
  else {
    KVStore::Error->invalid("cannot apply '$OP_SYMBOL{$op}=' to an NDArray and '"
        . ($other // 'undef') . "'");
  }
  return $self;
}

# Known dtype names, for callers that validate their own input.
sub dtypes { sort keys %DTYPE }

# ---------------------------------------------------------------------------------------
# Storage types (see KVStore::NDArray::RowSparse)

my %STYPE = (default => $KVStore::Raw::KV_STYPE_DEFAULT,
             row_sparse => $KVStore::Raw::KV_STYPE_ROW_SPARSE);

sub _dtype_code { $DTYPE{ $_[0] }{code} }

# mx->nd->sparse: row_sparse_array, zeros('row_sparse', ...).
sub sparse {'KVStore::NDArray::Sparse'}

# 'default' (this class) or 'row_sparse' (KVStore::NDArray::RowSparse).
sub stype {'default'}

# A new array of storage type 'default' or 'row_sparse' with this array's contents (the
# reference's cast_storage): dense to row_sparse keeps the rows that have a non-zero element,
# row_sparse to dense gives zero rows where nothing is stored, the same type copies.
sub tostype {
  my ($self, $stype) = @_;
  KVStore::Error->invalid('tostype: unknown storage type ' . _show($stype)
      . " (known: default, row_sparse)")
    unless defined $stype && !ref $stype && exists $STYPE{$stype};
  my ($rc, $h) = KVStore::Raw::KVArrayCastStorage($self->handle, $STYPE{$stype});
  KVStore::Error->check($rc);
  return bless { handle => $h },
    $stype eq 'row_sparse' ? 'KVStore::NDArray::RowSparse' : __PACKAGE__;
}

require KVStore::NDArray::RowSparse;

1;
