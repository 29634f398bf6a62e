#!/usr/bin/perl
# The Perl KVStore tutorial (shared/seeds/perl-kvstore.md), run as a script. The statements
# below are the tutorial's, unchanged: only the `use` line differs from the MXNet original.
#
#   PERL5LIB=bindings/perl/lib:build/bindings/perl/lib perl examples/perl/kvstore_tutorial.pl
#
# (build/ being your CMake build directory). It needs PDL for aspdl (Debian package pdl).
use KVStore;

## Basic Push and Pull: initialization
$kv = mx->kv->create('local');
$shape = [2,3];
$kv->init(3, mx->nd->ones($shape)*2);
$a = mx->nd->zeros($shape);
$kv->pull(3, out => $a);
print $a->aspdl;

## Push, aggregation, and updater
$kv->push(3, mx->nd->ones($shape)*8);
$a = mx->nd->zeros($shape);
$kv->pull(3, out => $a);
print $a->aspdl;

$kv->push(3, [mx->nd->ones($shape, ctx=>mx->cpu(0)), mx->nd->ones($shape, ctx=>mx->cpu(1))]);
$kv->pull(3, out => $a);
print $a->aspdl;

$updater = sub { my ($key, $input, $stored) = @_; print "update on key: $key\n"; $stored += $input * 3; };
$kv->_set_updater($updater);
$kv->push(3, [mx->nd->ones($shape, ctx=>mx->cpu(0)), mx->nd->ones($shape, ctx=>mx->cpu(1))]);
$kv->pull(3, out => $a);
print $a->aspdl;

## Pull into several devices
$b = [mx->nd->zeros($shape, ctx=>mx->cpu(0)), mx->nd->zeros($shape, ctx=>mx->cpu(1))];
$kv->pull(3, out => $b);
print $b->[1]->aspdl;

## List key-value pairs
$keys = [5,7,9];
$kv->init($keys, [map { mx->nd->ones($shape) } 0..@$keys-1]);
$kv->push($keys, [map { mx->nd->ones($shape) } 0..@$keys-1]);
$b = [map { mx->nd->ones($shape) } 0..@$keys-1];
$kv->pull($keys, out => $b);
print $b->[1]->aspdl;
