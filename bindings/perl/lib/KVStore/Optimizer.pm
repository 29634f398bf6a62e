package KVStore::Optimizer;

# The built-in optimizers as objects (docs/OPTIMIZERS.md), accepted by $kv->set_optimizer:
#
#   $kv->set_optimizer(KVStore::Optimizer::SGD->new(learning_rate => 0.1, momentum => 0.9));
#   my $opt = KVStore::Optimizer->create('adam', learning_rate => 0.001);   # or mx->optimizer
#   print $opt->spec;                                   # adam(learning_rate=0.001)
#
# Classes: KVStore::Optimizer::SGD, ::NAG, ::Adam, ::AdaGrad, ::RMSProp, ::Test. Parameters are
# the spec's (learning_rate or lr, wd, rescale_grad, clip_gradient, momentum, beta1, beta2,
# epsilon, eps, gamma1, gamma2, rho, centered, clip_weights, multi_precision, lazy_update); undef
# leaves a parameter at the library's default. centered, multi_precision and lazy_update are
# flags (true/false; multi_precision is given only when true). lazy_update (SGD and Adam; the
# library's default is true): a row_sparse push updates only its rows of the weight and of the
# optimizer state; false applies it densely, so weight decay and momentum move every row
# (docs/OPTIMIZERS.md, "Row-sparse gradients: lazy updates"). The library checks the spec in
# new(), so an unknown parameter (lazy_update for NAG, AdaGrad, RMSProp or Test included) or a
# value out of range dies there with KVStore::Error::InvalidArgument and the library's message,
# never later in set_optimizer.

use strict;
use warnings;

use Scalar::Util qw(looks_like_number);

use KVStore::Raw ();
use KVStore::Error;

my %FLAG = (centered => 1, multi_precision => 1, lazy_update => 1);
my @CLASSES = qw(SGD NAG Adam AdaGrad RMSProp Test);

sub _name { KVStore::Error->invalid('KVStore::Optimizer is abstract; use ::SGD, ::Adam, ... or create') }

sub new {
  my ($class, @args) = @_;
  KVStore::Error->invalid("$class->new takes name => value pairs") if @args % 2;
  my @params;    # [name, value] in the order given
  while (my ($k, $v) = splice @args, 0, 2) {
    next unless defined $v;
    KVStore::Error->invalid("$class->new: parameter $k must be a number, got '$v'")
      if ref $v || !($FLAG{$k} || looks_like_number($v));
    push @params, [$k, $FLAG{$k} ? ($v ? 1 : 0) : $v];
  }
  my $self = bless { name => $class->_name, params => \@params }, ref $class || $class;
  $self->{spec} = $self->_render;
  # Checked by the library now, on a scratch local store.
  my ($rc, $scratch) = KVStore::Raw::KVStoreCreate('local');
  KVStore::Error->check($rc);
  $rc = KVStore::Raw::KVStoreSetOptimizer($scratch, $self->{spec});
  my $message = KVStore::Raw::KVGetLastError();
  KVStore::Raw::KVStoreFree($scratch);
  KVStore::Error->throw($rc, $message) if $rc;
  return $self;
}

# The optimizer called $name ('sgd', 'adam', ...; case-insensitive) with %params.
sub create {
  my ($class, $name, @params) = @_;
  my %class_of = map { lc($_) => "KVStore::Optimizer::$_" } @CLASSES;
  KVStore::Error->invalid("unknown optimizer '" . ($name // 'undef') . "' (known: "
      . join(', ', sort keys %class_of) . ')')
    unless defined $name && !ref $name && $class_of{ lc $name };
  return $class_of{ lc $name }->new(@params);
}

# A number as the library reads it back: Perl's own form when that is exact, else 17 digits.
sub _number {
  my ($v) = @_;
  my $short = sprintf('%.15g', $v);
  return $short == $v ? $short : sprintf('%.17g', $v);
}

sub _render {
  my ($self) = @_;
  my @parts;
  for my $p (@{ $self->{params} }) {
    my ($k, $v) = @$p;
    next if $k eq 'multi_precision' && !$v;    # the default, also where the library lacks it
    push @parts, "$k=" . ($FLAG{$k} ? $v : _number($v));
  }
  return @parts ? "$self->{name}(" . join(',', @parts) . ')' : $self->{name};
}

sub name { $_[0]->{name} }
sub spec { $_[0]->{spec} }

# The value given for a parameter (undef when left at the default).
sub param {
  my ($self, $name) = @_;
  my ($p) = grep { $_->[0] eq $name } @{ $self->{params} };
  return $p ? $p->[1] : undef;
}

use overload '""' => sub { $_[0]->spec }, fallback => 1;

# The classes, one per built-in optimizer: KVStore::Optimizer::SGD is 'sgd', and so on.
for my $class (@CLASSES) {
  no strict 'refs';
  my $name = lc $class;
  @{"KVStore::Optimizer::${class}::ISA"} = ('KVStore::Optimizer');
  *{"KVStore::Optimizer::${class}::_name"} = sub {$name};
}

1;
