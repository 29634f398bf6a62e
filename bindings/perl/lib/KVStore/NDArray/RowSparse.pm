package KVStore::NDArray::RowSparse;

# Row-sparse arrays, as AI::MXNet's NDArray::RowSparse and mx->nd->sparse:
#
#   my $g = mx->nd->sparse->row_sparse_array([[[1, 2], [3, 4]], [4, 1]], shape => [6, 2]);
#   $g->indices->aslist;                 # (1, 4): sorted, each row moved with its id
#   $g->data->aslist;                    # (3, 4, 1, 2)
#   $g->tostype('default')->aslist;      # the logical 6x2 array, zero rows elsewhere
#   my $out = mx->nd->sparse->zeros('row_sparse', [6, 2]);
#   $kv->row_sparse_pull(3, out => $out, row_ids => mx->nd->array([4, 1, 4], dtype => 'int64'));
#
# A row_sparse array of shape (R, d1, ..., dk) stores the ids of some rows (increasing, in
# [0, R)) and a dense block of those rows, shape (n, d1, ..., dk); every other row reads as
# zero. It lives in host memory. shape, size, dtype and context are the logical array's;
# aslist, asarray and aspdl give the logical (dense) contents, tobytes the block. Arithmetic,
# fill, copyto and set are dense operations: the library refuses them with
# KVStore::Error::NotSupported, as this class does for rows (at, slice, set_row) and astype;
# cast with tostype('default') first. Only row_sparse_pull changes an array's row set.

use strict;
use warnings;

use Scalar::Util qw(blessed);

use KVStore::Raw ();
use KVStore::Error;
use KVStore::NDArray;

our @ISA = ('KVStore::NDArray');

sub stype {'row_sparse'}

sub num_rows {
  my ($self) = @_;
  my ($rc, $n) = KVStore::Raw::KVArrayGetNumRows($self->handle);
  KVStore::Error->check($rc);
  return $n;
}

# The stored row ids: a new 1-d int64 NDArray, increasing.
sub indices {
  my ($self) = @_;
  my ($rc, $ids) = KVStore::Raw::KVArrayGetRowIds($self->handle);
  KVStore::Error->check($rc);
  my $out = KVStore::NDArray->empty([scalar @$ids], dtype => 'int64');
  $out->_from_bytes(pack 'q*', @$ids) if @$ids;
  return $out;
}

# The stored rows: a new dense NDArray of shape (num_rows, d1, ..., dk), on this context.
sub data {
  my ($self) = @_;
  my $shape = $self->shape;
  my $bytes = $self->tobytes;
  my $out = KVStore::NDArray->empty([$self->num_rows, @$shape[1 .. $#$shape]],
                                    dtype => $self->dtype, ctx => $self->context);
  $out->_from_bytes($bytes) if length $bytes;
  return $out;
}

sub copy { $_[0]->tostype('row_sparse') }

sub aslist { $_[0]->tostype('default')->aslist }

sub aspdl { $_[0]->tostype('default')->aspdl }

sub _dense_only {
  my ($self, $what) = @_;
  KVStore::Error->throw($KVStore::Raw::KV_ERR_NOT_SUPPORTED,
    "$what is a dense operation and $self is row_sparse; cast it with tostype('default') first");
}

sub set     { $_[0]->_dense_only('set') }
sub at      { $_[0]->_dense_only('at') }
sub slice   { $_[0]->_dense_only('slice') }
sub set_row { $_[0]->_dense_only('set_row') }
sub astype  { $_[0]->_dense_only('astype') }

sub _describe {
  my ($self) = @_;
  return '<KVStore::NDArray::RowSparse (updater view, no longer valid)>'
    unless defined $self->{handle};
  return '<KVStore::NDArray::RowSparse ' . join('x', @{ $self->shape }) . ' @' . $self->context
    . '>';
}

package KVStore::NDArray::Sparse;

# mx->nd->sparse: constructors of row-sparse arrays.

use Scalar::Util qw(blessed);

# A row_sparse array with no stored rows: zeros('row_sparse', $shape, ctx => ..., dtype => ...).
sub zeros {
  my ($class, $stype, $shape, @opt) = @_;
  KVStore::Error->invalid("sparse zeros: the storage type must be 'row_sparse', got "
      . KVStore::NDArray::_show($stype))
    unless defined $stype && !ref $stype && $stype eq 'row_sparse';
  my ($dtype, $ctx) = KVStore::NDArray::_options('sparse zeros', @opt);
  return _create(KVStore::NDArray::_shape_arg('sparse zeros', $shape), $dtype, $ctx, []);
}

sub _create {
  my ($shape, $dtype, $ctx, $ids) = @_;
  my ($rc, $h) = KVStore::Raw::KVArrayCreateRowSparse(
    $shape, KVStore::NDArray::_dtype_code($dtype), $ctx->_placement, $ids);
  KVStore::Error->check($rc);
  return bless { handle => $h }, 'KVStore::NDArray::RowSparse';
}

# row_sparse_array([$data, $indices], shape => [...], ctx => ..., dtype => ...): row $i of
# $data (nested array refs, an NDArray or a PDL) is row $indices->[$i] ($indices: integers in
# any order, no repeats; an array ref or an NDArray); shape defaults to (max id + 1, rows'
# dims). row_sparse_array($dense): the rows of a dense NDArray (or nested lists) that have a
# non-zero element; row_sparse_array($row_sparse): a copy.
sub row_sparse_array {
  my ($class, $arg, @opt) = @_;
  KVStore::Error->invalid('row_sparse_array: options must be name => value pairs') if @opt % 2;
  my %o = @opt;
  my $shape = delete $o{shape};
  return _from_rows($arg->[0], $arg->[1], $shape, %o) if _is_rows_and_ids($arg);
  return $arg->copy if blessed $arg && $arg->isa('KVStore::NDArray::RowSparse');
  my $dense = _dense_arg($arg, %o);
  KVStore::Error->invalid('row_sparse_array: shape ' . KVStore::NDArray::_show($shape)
      . ' differs from the dense source\'s ' . KVStore::NDArray::_show($dense->shape))
    if defined $shape && join(',', @$shape) ne join(',', @{ $dense->shape });
  return $dense->tostype('row_sparse');
}

# A dense NDArray from an NDArray (converted to the dtype and context asked for) or from what
# KVStore::NDArray->array takes.
sub _dense_arg {
  my ($data, %o) = @_;
  return KVStore::NDArray->array($data, %o) unless blessed $data && $data->isa('KVStore::NDArray');
  $data = $data->astype($o{dtype}) if defined $o{dtype} && $o{dtype} ne $data->dtype;
  $data = $data->as_in_context($o{ctx}) if defined $o{ctx};
  return $data;
}

# [$data, $indices]: data an NDArray, a PDL or lists of rows (of at least two dims: 1-d data
# given as lists reads as a dense array, so pass an NDArray there), indices an NDArray or a
# list of numbers.
sub _is_rows_and_ids {
  my ($arg) = @_;
  return 0 unless ref $arg eq 'ARRAY' && @$arg == 2;
  my ($data, $ids) = @$arg;
  my $data_ok = (blessed $data && ($data->isa('KVStore::NDArray') || $data->isa('PDL')))
    || (ref $data eq 'ARRAY' && @$data && ref $data->[0] eq 'ARRAY');
  my $ids_ok = (blessed $ids && $ids->isa('KVStore::NDArray'))
    || (ref $ids eq 'ARRAY' && !grep { ref } @$ids);
  return $data_ok && $ids_ok;
}

sub _from_rows {
  my ($data, $indices, $shape, %o) = @_;
  my @ids = blessed $indices && $indices->isa('KVStore::NDArray') ? $indices->aslist : @$indices;
  for my $id (@ids) {
    KVStore::Error->invalid('row_sparse_array: indices must be integers, got '
        . KVStore::NDArray::_show($id))
      unless defined $id && !ref $id && $id =~ /\A-?[0-9]+(?:\.0*)?\z/;
  }
  my $rows = _dense_arg($data, %o);
  my $rshape = $rows->shape;
  KVStore::Error->invalid('row_sparse_array: data of shape ' . KVStore::NDArray::_show($rshape)
      . ' does not hold one row per index (' . scalar(@ids) . ' indices)')
    unless @$rshape && $rshape->[0] == @ids;
  my @order = sort { $ids[$a] <=> $ids[$b] } 0 .. $#ids;
  my @sorted = map { 0 + $ids[$_] } @order;
  for my $i (1 .. $#sorted) {
    KVStore::Error->invalid("row_sparse_array: index $sorted[$i] appears more than once")
      if $sorted[$i] == $sorted[$i - 1];
  }
  $shape //= [@sorted ? $sorted[-1] + 1 : 0, @$rshape[1 .. $#$rshape]];
  $shape = KVStore::NDArray::_shape_arg('row_sparse_array', $shape);
  KVStore::Error->throw($KVStore::Raw::KV_ERR_SHAPE_MISMATCH,
    'row_sparse_array: rows of shape ' . KVStore::NDArray::_show([@$rshape[1 .. $#$rshape]])
      . ' do not fit shape ' . KVStore::NDArray::_show($shape))
    unless @$shape == @$rshape
    && join(',', @$shape[1 .. $#$shape]) eq join(',', @$rshape[1 .. $#$rshape]);
  my $out = _create($shape, $rows->dtype, $rows->context, \@sorted);
  my $bytes = $rows->tobytes;
  if (length $bytes) {
    my $row_bytes = length($bytes) / @ids;
    $out->_from_bytes(join '', map { substr($bytes, $_ * $row_bytes, $row_bytes) } @order);
  }
  return $out;
}

1;
