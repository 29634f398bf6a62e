package KVStore::Store;

# A key-value store (what mx->kv->create returns).
#
#   my $kv = mx->kv->create('local');
#   $kv->init(3, mx->nd->ones([2, 3]));
#   $kv->push(3, [$g0, $g1]);                 # one value per device: summed
#   $kv->pull(3, out => $a);                  # or out => [$a0, $a1]
#   $kv->init([5, 7], [$x, $y]);              # lists of keys with one value (or list) each
#   $kv->row_sparse_pull(3, out => $rsp, row_ids => $ids);   # rows of a key (RowSparse.pm)
#   $kv->_set_updater(sub { my ($key, $input, $stored) = @_; $stored += $input });
#
# Keys are ints or strings. A key written as a canonical integer within C int range (3, -1,
# not "03") is an int key, anything else a string key; one store uses one kind (the library raises
# KVStore::Error::KeyKindMismatch otherwise).
#
# The store is freed in DESTROY when the last reference goes away (or by ->close); freeing
# it releases its updater, so the code ref (and whatever its closure holds) is released too.
# An updater that dies makes push/pushpull die with that same exception; the stored value is
# then left as it was before the call.

use strict;
use warnings;

use Scalar::Util qw(blessed);

use KVStore::Raw ();
use KVStore::Error;
use KVStore::NDArray;
use KVStore::Optimizer;

my $INT_KEY = qr/\A(?:0|-?[1-9][0-9]*)\z/;    # canonical integers only: "03" is a string

sub new {
  my ($class, $type) = @_;
  $type //= 'local';
  KVStore::Error->invalid("create: the store type must be a string, got '$type'") if ref $type;
  my ($rc, $h) = KVStore::Raw::KVStoreCreate($type);
  KVStore::Error->check($rc);
  return bless { handle => $h }, ref $class || $class;
}

sub create { my ($class, @args) = @_; return $class->new(@args) }

sub _handle {
  my ($self) = @_;
  return $self->{handle} // KVStore::Error->throw($KVStore::Raw::KV_ERR_NULL_POINTER,
    'this store has been closed');
}

# Frees the store now (DESTROY does it otherwise). Returns the library's status check.
#
# Closing while a call on the store runs (from inside the store's own updater or server
# controller) dies with KVStore::Error::Busy, and the store stays open and usable: the library
# frees nothing then. No other thread can close it meanwhile: stores are not cloned into
# other Perl threads (CLONE_SKIP), so every call that could be running on this store is the
# one this thread is inside of, already counted by the library.
sub close {
  my ($self) = @_;
  my $h = delete $self->{handle};
  return unless defined $h;
  my $rc = KVStore::Raw::KVStoreFree($h);
  my $message = $rc ? KVStore::Raw::KVGetLastError() : undef;
  $self->{handle} = $h if $rc == $KVStore::Raw::KV_ERR_BUSY;
  KVStore::Raw::kvperl_drain_releases();
  KVStore::Error->throw($rc, $message) if $rc;
  return;
}

sub DESTROY {
  my ($self) = @_;
  local ($@, $!, $?);
  eval { $self->close; 1 } or warn "KVStore: freeing the store failed: $@\n";
}

sub CLONE_SKIP { 1 }

# ---------------------------------------------------------------------------------------
# Properties

sub type {
  my ($self) = @_;
  my ($rc, $type) = KVStore::Raw::KVStoreGetType($self->_handle);
  KVStore::Error->check($rc);
  return $type;
}

sub rank {
  my ($self) = @_;
  my ($rc, $r) = KVStore::Raw::KVStoreGetRank($self->_handle);
  KVStore::Error->check($rc);
  return $r;
}

sub num_workers {
  my ($self) = @_;
  my ($rc, $n) = KVStore::Raw::KVStoreGetGroupSize($self->_handle);
  KVStore::Error->check($rc);
  return $n;
}

sub num_dead_node {
  my ($self, $node_id, $timeout_sec) = @_;
  my ($rc, $n) = KVStore::Raw::KVStoreGetNumDeadNode($self->_handle, $node_id // 7,
                                                      $timeout_sec // 60);
  KVStore::Error->check($rc);
  return $n;
}

# ---------------------------------------------------------------------------------------
# Keys and value lists

sub _key_kind {
  my ($key) = @_;
  KVStore::Error->invalid('a key must be an int or a string, got '
      . (defined $key ? "'$key'" : 'undef'))
    if !defined $key || ref $key;
  return ($key =~ $INT_KEY && $key >= -2**31 && $key <= 2**31 - 1) ? 'int' : 'str';
}

sub _array_handle {
  my ($what, $v) = @_;
  KVStore::Error->invalid("$what: expected an NDArray, got '" . ($v // 'undef') . "'")
    unless blessed $v && $v->isa('KVStore::NDArray');
  return $v->handle;
}

# ($key | [keys], $value | [values] | [[values]...]) -> (kind, [keys], [handles]) with each
# key repeated once per value given for it.
sub _pairs {
  my ($what, $key, $value) = @_;
  my (@keys, @handles);
  my @groups;
  if (ref $key eq 'ARRAY') {
    KVStore::Error->invalid("$what: a list of keys needs a list of values")
      unless ref $value eq 'ARRAY';
    KVStore::Error->invalid("$what: " . scalar(@$key) . ' keys but ' . scalar(@$value)
        . ' values')
      unless @$key == @$value;
    @groups = map { [$key->[$_], $value->[$_]] } 0 .. $#$key;
  }
  else {
    @groups = ([$key, $value]);
  }
  my $kind;
  for my $g (@groups) {
    my ($k, $v) = @$g;
    my $this = _key_kind($k);
    $kind //= $this;
    if ($this ne $kind) {
      KVStore::Error->throw($KVStore::Raw::KV_ERR_KEY_KIND_MISMATCH,
        "$what: key '$k' is a" . ($this eq 'int' ? 'n int' : ' string') . ' key but key '
          . "'$groups[0][0]' of the same call is a" . ($kind eq 'int' ? 'n int' : ' string')
          . ' key');
    }
    my @vs = ref $v eq 'ARRAY' ? @$v : ($v);
    KVStore::Error->invalid("$what: no value given for key '$k'") unless @vs;
    for my $one (@vs) {
      CORE::push @keys, $k;
      CORE::push @handles, _array_handle($what, $one);
    }
  }
  return ($kind // 'int', \@keys, \@handles);
}

# Hot paths: push, pull and pushpull of one int key with one NDArray, or of a list of int keys
# with a list of as many NDArrays, without options (pull and pushpull: out only) skip _named,
# _pairs and _fn. Anything these checks do not accept takes the general path, which accepts it
# or croaks as before: the hot paths change what a call costs, not what it does.

# The keys of $key as an array ref when it is an int key or a non-empty list of them (as
# _key_kind decides), else undef.
sub _hot_keys {
  my ($key) = @_;
  if (ref $key) {
    return undef unless ref $key eq 'ARRAY' && @$key;
    # One match over the joined list instead of one per key: every key a canonical integer
    # of at most 9 digits (so within C int; longer ones take the general path), and no key
    # holding a comma of its own (the commas are exactly the separators). undef joins as ''.
    no warnings 'uninitialized';
    my $joined = join ',', @$key;
    return undef unless ($joined =~ tr/,//) == $#$key
      && $joined =~ /\A(?:(?:0|-?[1-9][0-9]{0,8}),)*(?:0|-?[1-9][0-9]{0,8})\z/;
    return $key;
  }
  return undef if !defined $key || $key !~ /\A(?:0|-?[1-9][0-9]*)\z/
    || $key < -2147483648 || $key > 2147483647;
  return [$key];
}

# The handles of $value as an array ref when it is one live plain NDArray (for an int key, not
# a list: $list false) or a list of $n of them, else undef.
sub _hot_handles {
  my ($value, $n, $list) = @_;
  if (!$list) {
    return undef unless ref $value eq 'KVStore::NDArray' && defined $value->{handle};
    return [$value->{handle}];
  }
  return undef unless ref $value eq 'ARRAY' && @$value == $n;
  return [map { ref $_ eq 'KVStore::NDArray' && defined $_->{handle} ? $_->{handle}
                                                                      : return undef } @$value];
}

sub _named {
  my ($what, $allowed, @rest) = @_;
  KVStore::Error->invalid("$what: options must be name => value pairs") if @rest % 2;
  my %o = @rest;
  for my $k (keys %o) {
    KVStore::Error->invalid("$what: unknown option '$k' (known: @$allowed)")
      unless grep { $_ eq $k } @$allowed;
  }
  my $p = $o{priority} // 0;
  KVStore::Error->invalid("$what: priority must be an integer, got '$p'")
    unless !ref $p && $p =~ /\A-?[0-9]+\z/;
  return \%o;
}

# Calls a data function; an updater's exception is rethrown as it was raised.
sub _call {
  my ($self, $fn, @args) = @_;
  local $KVStore::Raw::CALLBACK_ERROR;
  my $foreign = KVStore::Raw::kvperl_foreign_callback_count();
  my $rc = $fn->(@args);
  return if !$rc;
  _call_failed($rc, $foreign);
}

# Dies with the error of a failed data call ($foreign: the foreign callback count before it).
sub _call_failed {
  my ($rc, $foreign) = @_;
  my $message = KVStore::Raw::KVGetLastError();
  if ($rc == $KVStore::Raw::KV_ERR_CALLBACK) {
    die $KVStore::Raw::CALLBACK_ERROR if defined $KVStore::Raw::CALLBACK_ERROR;
    $message .= ' (the Perl callback was invoked on a thread that does not own the Perl '
      . 'interpreter, so it was not run)'
      if KVStore::Raw::kvperl_foreign_callback_count() != $foreign;
  }
  KVStore::Error->throw($rc, $message);
}

sub _fn {
  my ($name, $kind) = @_;
  no strict 'refs';
  return \&{"KVStore::Raw::KVStore$name" . ($kind eq 'str' ? 'Str' : '')};
}

# ---------------------------------------------------------------------------------------
# Data calls

sub init {
  my ($self, $key, $value) = @_;
  my ($kind, $keys, $vals) = _pairs('init', $key, $value);
  $self->_call(_fn('Init', $kind), $self->_handle, $keys, $vals);
  return $self;
}

sub push {
  my ($self, $key, $value, @opt) = @_;
  # One int key and one NDArray, or lists of them: checked and called in one XS function
  # (kvperl_hot_call, undef when it does not take the arguments; on failure it leaves the
  # foreign-callback count from before the call in $KVStore::Raw::HOT_FOREIGN); then as below.
  if (!@opt) {
    local $KVStore::Raw::CALLBACK_ERROR;
    my $rc = KVStore::Raw::kvperl_hot_call(0, $self->{handle} // $self->_handle, $key, $value,
                                           0);
    if (defined $rc) {
      _call_failed($rc, $KVStore::Raw::HOT_FOREIGN) if $rc;
      return $self;
    }
  }
  # One int key and one NDArray: _hot_keys, _hot_handles and _call inlined.
  if (!@opt && !ref $key && defined $key && $key =~ /\A(?:0|-?[1-9][0-9]*)\z/
      && $key >= -2147483648 && $key <= 2147483647 && ref $value eq 'KVStore::NDArray'
      && defined(my $vh = $value->{handle})) {
    local $KVStore::Raw::CALLBACK_ERROR;
    my $foreign = KVStore::Raw::kvperl_foreign_callback_count();
    my $rc = KVStore::Raw::KVStorePush($self->{handle} // $self->_handle, [$key], [$vh], 0);
    _call_failed($rc, $foreign) if $rc;
    return $self;
  }
  if (!@opt and my $keys = _hot_keys($key)) {
    if (my $vals = _hot_handles($value, scalar @$keys, ref $key)) {
      $self->_call(\&KVStore::Raw::KVStorePush, $self->{handle} // $self->_handle, $keys,
                   $vals, 0);
      return $self;
    }
  }
  my $o = _named('push', ['priority'], @opt);
  my ($kind, $keys, $vals) = _pairs('push', $key, $value);
  $self->_call(_fn('Push', $kind), $self->_handle, $keys, $vals, $o->{priority} // 0);
  return $self;
}

sub pull {
  my ($self, $key, @opt) = @_;
  if (@opt == 2 && $opt[0] eq 'out') {  # as in push
    local $KVStore::Raw::CALLBACK_ERROR;
    my $rc = KVStore::Raw::kvperl_hot_call(1, $self->{handle} // $self->_handle, $key, $opt[1],
                                           0);
    if (defined $rc) {
      _call_failed($rc, $KVStore::Raw::HOT_FOREIGN) if $rc;
      return $self;
    }
  }
  # One int key and one NDArray: as in push.
  if (@opt == 2 && $opt[0] eq 'out' && !ref $key && defined $key
      && $key =~ /\A(?:0|-?[1-9][0-9]*)\z/ && $key >= -2147483648 && $key <= 2147483647
      && ref $opt[1] eq 'KVStore::NDArray' && defined(my $oh = $opt[1]{handle})) {
    local $KVStore::Raw::CALLBACK_ERROR;
    my $foreign = KVStore::Raw::kvperl_foreign_callback_count();
    my $rc = KVStore::Raw::KVStorePull($self->{handle} // $self->_handle, [$key], [$oh], 0);
    _call_failed($rc, $foreign) if $rc;
    return $self;
  }
  if (@opt == 2 && $opt[0] eq 'out' and my $keys = _hot_keys($key)) {
    if (my $outs = _hot_handles($opt[1], scalar @$keys, ref $key)) {
      $self->_call(\&KVStore::Raw::KVStorePull, $self->{handle} // $self->_handle, $keys,
                   $outs, 0);
      return $self;
    }
  }
  my $o = _named('pull', [qw(out priority ignore_sparse)], @opt);
  KVStore::Error->invalid('pull: out => NDArray (or a list of them) is required')
    unless defined $o->{out};
  my ($kind, $keys, $outs) = _pairs('pull', $key, $o->{out});
  $self->_call(_fn('Pull', $kind), $self->_handle, $keys, $outs, $o->{priority} // 0);
  return $self;
}

# Push then pull in one call; without out => the values themselves receive the result.
sub pushpull {
  my ($self, $key, $value, @opt) = @_;
  if ((!@opt || @opt == 2 && $opt[0] eq 'out') and my $keys = _hot_keys($key)) {
    my $vals = _hot_handles($value, scalar @$keys, ref $key);
    my $outs = @opt ? _hot_handles($opt[1], scalar @$keys, ref $key) : $vals;
    if ($vals && $outs) {
      $self->_call(\&KVStore::Raw::KVStorePushPull, $self->{handle} // $self->_handle, $keys,
                   $vals, $keys, $outs, 0);
      return $self;
    }
  }
  my $o = _named('pushpull', [qw(out priority)], @opt);
  my ($kind, $vkeys, $vals) = _pairs('pushpull', $key, $value);
  my (undef, $okeys, $outs) = _pairs('pushpull', $key, $o->{out} // $value);
  $self->_call(_fn('PushPull', $kind), $self->_handle, $vkeys, $vals, $okeys, $outs,
               $o->{priority} // 0);
  return $self;
}

# Init then pull: a key can be broadcast once.
sub broadcast {
  my ($self, $key, $value, @opt) = @_;
  my $o = _named('broadcast', [qw(out priority)], @opt);
  KVStore::Error->invalid('broadcast: out => NDArray (or a list of them) is required')
    unless defined $o->{out};
  my ($kind, $vkeys, $vals) = _pairs('broadcast', $key, $value);
  my (undef, $okeys, $outs) = _pairs('broadcast', $key, $o->{out});
  $self->_call(_fn('Broadcast', $kind), $self->_handle, $vkeys, $vals, $okeys, $outs,
               $o->{priority} // 0);
  return $self;
}

# ---------------------------------------------------------------------------------------
# Row-sparse pull

# row_sparse_pull($key, out => $rsp, row_ids => $ids, priority => 0), as the reference's: each
# output (a row_sparse array of the key's shape and dtype, e.g. from
# mx->nd->sparse->zeros('row_sparse', $shape)) then holds exactly the rows of the key's value
# named by its row_ids, replacing what it held. row_ids: a dense NDArray of integral values
# of any dtype (or a list of integers), in any order, repeats allowed; one serves every output,
# or give one per output in the shape of out. Keys and outputs as in pull. A failure (a row id
# out of range, say) changes no output.
sub row_sparse_pull {
  my ($self, $key, @opt) = @_;
  my $o = _named('row_sparse_pull', [qw(out priority row_ids)], @opt);
  KVStore::Error->invalid('row_sparse_pull: out => NDArray (or a list of them) is required')
    unless defined $o->{out};
  KVStore::Error->invalid('row_sparse_pull: row_ids => NDArray (or a list of them) is required')
    unless defined $o->{row_ids};
  my ($kind, $keys, $outs) = _pairs('row_sparse_pull', $key, $o->{out});
  my $row_ids = $o->{row_ids};
  # A list of integers becomes an int64 array, alive until the call returns.
  $row_ids = KVStore::NDArray->array($row_ids, dtype => 'int64')
    if ref $row_ids eq 'ARRAY' && @$row_ids && !grep { ref } @$row_ids;
  my $ids = _row_ids_list($row_ids, $key, scalar @$outs);
  $self->_call(_fn('RowSparsePull', $kind), $self->_handle, $keys, $outs, $ids,
               $o->{priority} // 0);
  return $self;
}

# The row_ids handles, one per output: one array repeated, or a list in the shape of out.
sub _row_ids_list {
  my ($row_ids, $key, $nouts) = @_;
  return [(_array_handle('row_sparse_pull', $row_ids)) x $nouts] if blessed $row_ids;
  my (undef, undef, $ids) = _pairs('row_sparse_pull', $key, $row_ids);
  return [($ids->[0]) x $nouts] if @$ids == 1;
  KVStore::Error->invalid("row_sparse_pull: $nouts outputs but " . scalar(@$ids) . ' row_ids')
    unless @$ids == $nouts;
  return $ids;
}

# ---------------------------------------------------------------------------------------
# Updaters, optimizer, synchronisation

# Sets the updater: sub { my ($key, $input, $stored) = @_; ... } merging $input into $stored
# in place (e.g. $stored += $input * 3). The same sub serves int keys and string keys (it gets
# the string). undef restores the default (assign).
sub _set_updater {
  my ($self, $code) = @_;
  KVStore::Error->invalid('_set_updater: the updater must be a code reference or undef')
    if defined $code && ref $code ne 'CODE';
  my $h = $self->_handle;
  KVStore::Error->check(KVStore::Raw::KVStoreSetUpdater($h, $code));
  KVStore::Error->check(KVStore::Raw::KVStoreSetStrUpdater($h, $code));
  KVStore::Raw::kvperl_drain_releases();
  return $self;
}

sub set_updater { my ($self, @args) = @_; return $self->_set_updater(@args) }

# A built-in optimizer from a spec string ('sgd(learning_rate=0.1,momentum=0.9)'), from
# a name and a hash ref of parameters: set_optimizer(sgd => {learning_rate => 0.1}), or from
# a KVStore::Optimizer object: set_optimizer(KVStore::Optimizer::SGD->new(learning_rate => 0.1)).
sub set_optimizer {
  my ($self, $spec, $params) = @_;
  $spec = $spec->spec if blessed $spec && $spec->isa('KVStore::Optimizer') && !defined $params;
  KVStore::Error->invalid('set_optimizer: the spec must be a string or a KVStore::Optimizer')
    if !defined $spec || ref $spec;
  if (defined $params) {
    KVStore::Error->invalid('set_optimizer: parameters must be a hash ref')
      unless ref $params eq 'HASH';
    $spec .= '(' . join(',', map {"$_=$params->{$_}"} sort keys %$params) . ')';
  }
  KVStore::Error->check(KVStore::Raw::KVStoreSetOptimizer($self->_handle, $spec));
  return $self;
}

# Compresses later pushes with the reference's gradient compression:
# set_gradient_compression({type => '2bit', threshold => 0.5}) (or '1bit'; threshold defaults
# to 0.5), with a residual per key (error feedback); {type => 'none'} turns it off again (the
# residuals are dropped). float32 and float16 pushes are compressed, other dtypes go
# uncompressed; init and pull never are. The device and dist_* stores compress; the others
# croak with KVStore::Error::NotSupported. Unknown names, types or a bad threshold croak with
# KVStore::Error::InvalidArgument and change nothing.
sub set_gradient_compression {
  my ($self, $params) = @_;
  KVStore::Error->invalid('set_gradient_compression: the parameters must be a hash ref')
    unless ref $params eq 'HASH';
  my @names = sort keys %$params;
  KVStore::Error->invalid("set_gradient_compression: parameter $_ is undefined")
    for grep { !defined $params->{$_} } @names;
  KVStore::Error->check(KVStore::Raw::KVStoreSetGradientCompression(
    $self->_handle, \@names, [map { "$params->{$_}" } @names]));
  return $self;
}

# Writes the state of the built-in optimizer (set_optimizer) to the file $fname, atomically,
# in the format of docs/OPTIMIZER-STATES.md. $dump_optimizer is accepted as the reference
# accepts it and ignored: the file always records the optimizer's spec.
sub save_optimizer_states {
  my ($self, $fname, $dump_optimizer) = @_;
  KVStore::Error->invalid('save_optimizer_states: the file name must be a string')
    if !defined $fname || ref $fname;
  KVStore::Error->check(KVStore::Raw::KVStoreSaveOptimizerStates($self->_handle, $fname));
  return $self;
}

# Replaces the built-in optimizer's state with the one saved in $fname; training then goes
# on exactly as from the save. A bad file or a mismatch with this store croaks and changes
# nothing.
sub load_optimizer_states {
  my ($self, $fname) = @_;
  KVStore::Error->invalid('load_optimizer_states: the file name must be a string')
    if !defined $fname || ref $fname;
  KVStore::Error->check(KVStore::Raw::KVStoreLoadOptimizerStates($self->_handle, $fname));
  return $self;
}

# Capabilities (KVStoreIsCapable): OPTIMIZER ('optimizer') is true for every store type.
use constant OPTIMIZER => 'optimizer';

# Whether the store has $capability (case-insensitive); an unknown name dies with
# KVStore::Error::InvalidArgument naming the known ones.
sub is_capable {
  my ($self, $capability) = @_;
  KVStore::Error->invalid('is_capable: the capability must be a string')
    if !defined $capability || ref $capability;
  my ($rc, $capable) = KVStore::Raw::KVStoreIsCapable($self->_handle, $capability);
  KVStore::Error->check($rc);
  return $capable ? 1 : 0;
}

sub _barrier {
  my ($self) = @_;
  KVStore::Error->check(KVStore::Raw::KVStoreBarrier($self->_handle));
  return $self;
}

sub barrier { my ($self) = @_; return $self->_barrier }

sub wait_all {
  my ($self) = @_;
  KVStore::Error->check(KVStore::Raw::KVStoreWaitAll($self->_handle));
  return $self;
}

sub set_barrier_before_exit {
  my ($self, $flag) = @_;
  KVStore::Error->check(
    KVStore::Raw::KVStoreSetBarrierBeforeExit($self->_handle, $flag ? 1 : 0));
  return $self;
}

sub _send_command_to_servers {
  my ($self, $head, $body) = @_;
  KVStore::Error->check(
    KVStore::Raw::KVStoreSendCommandToServers($self->_handle, $head, $body // ''));
  return $self;
}

sub send_command_to_servers { my ($self, @args) = @_; return $self->_send_command_to_servers(@args) }

# Server or scheduler process: blocks until the job ends. The controller (optional) gets
# ($head, $body) for commands sent with send_command_to_servers.
sub run_server {
  my ($self, $controller) = @_;
  KVStore::Error->invalid('run_server: the controller must be a code reference or undef')
    if defined $controller && ref $controller ne 'CODE';
  $self->_call(\&KVStore::Raw::KVStoreRunServer, $self->_handle, $controller);
  return $self;
}

1;
