/* kvstore.i - the one language-neutral SWIG interface of libkvstore.
 *
 * It wraps the real public headers (never a copied declaration list). Everything that is
 * specific to a language - typemaps, renames, library loading, callback trampolines - lives
 * in that language's file under bindings/swig/<language>/, included first.
 * The module name is given on the SWIG command line (-module) by each language's build.
 *
 * List calls. Every language reaches KVStoreInit/Push/Pull/PushPull/Broadcast/RowSparsePull
 * (and the *Str twins), and KVStoreSetGradientCompression's two string lists, through the
 * count-checking shims of kvstore_lists.h, under the C names: each list arrives with its own
 * length and a mismatch fails the same way everywhere. A language's
 * typemaps only convert one list to (count, pointer) for the parameter pairs named there.
 */

%ignore KVStoreInit;
%ignore KVStoreInitStr;
%ignore KVStorePush;
%ignore KVStorePushStr;
%ignore KVStorePull;
%ignore KVStorePullStr;
%ignore KVStorePushPull;
%ignore KVStorePushPullStr;
%ignore KVStoreBroadcast;
%ignore KVStoreBroadcastStr;
%ignore KVStoreRowSparsePull;
%ignore KVStoreRowSparsePullStr;
%rename(KVStoreInit) kvswig_init;
%rename(KVStoreInitStr) kvswig_init_str;
%rename(KVStorePush) kvswig_push;
%rename(KVStorePushStr) kvswig_push_str;
%rename(KVStorePull) kvswig_pull;
%rename(KVStorePullStr) kvswig_pull_str;
%rename(KVStorePushPull) kvswig_pushpull;
%rename(KVStorePushPullStr) kvswig_pushpull_str;
%rename(KVStoreBroadcast) kvswig_broadcast;
%rename(KVStoreBroadcastStr) kvswig_broadcast_str;
%rename(KVStoreRowSparsePull) kvswig_row_sparse_pull;
%rename(KVStoreRowSparsePullStr) kvswig_row_sparse_pull_str;
%ignore KVStoreSetGradientCompression;
%rename(KVStoreSetGradientCompression) kvswig_set_gradient_compression;
%ignore KVProfileGetStats;
%rename(KVProfileGetStats) kvswig_profile_get_stats;

#if defined(SWIGJAVA)
%include "java/kvstore_java.i"
#elif defined(SWIGPERL)
%include "perl/kvstore_perl.i"
#endif

%{
#include "kvstore/kvstore.h"
#include "kvstore_lists.h"
%}

%include "kvstore/kvstore_errors.h"
%include "kvstore/kvstore.h"
%include "kvstore_lists.h"
