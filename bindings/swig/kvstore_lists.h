/* kvstore_lists.h - the list calls of kvstore.h as every SWIG language wraps them.
 *
 * The C list calls (KVStoreInit, KVStorePush, ..., KVStoreBroadcastStr) take one count for a
 * key list and the handle list paired with it, and trust it. A language hands over two lists
 * of its own, each with its own length; these shims take both lengths, check that they agree
 * and only then make the C call. kvstore.i %ignores the C calls and renames the shims to their
 * names, so every language calls them with the same arguments in the same order, and each
 * language's typemaps only convert one list into (count, pointer):
 *
 *     (int num, const int* keys)  (int num, const char* const* keys)  and the vnum/vkeys,
 *     onum/okeys twins;  (int nvals, const KVArrayHandle* vals)  (int nouts, ... outs)
 *     (int nrow_ids, const KVArrayHandle* row_ids)
 *
 * A mismatch is reported the same way in every language: the shim returns
 * KV_ERR_INVALID_ARGUMENT without calling the library, and records the message
 * "<call>: <list> has <n> elements but <keys> has <m>" as this thread's binding error
 * (kvswig_take_error). The language turns it into its usual failure (a Java exception, a Perl
 * croak). Nothing is retained after a call; the lists stay the caller's.
 */
#ifndef KVSTORE_SWIG_LISTS_H_
#define KVSTORE_SWIG_LISTS_H_

#include "kvstore/kvstore.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef SWIG /* not wrapped: the languages use these from their typemaps */
/* Binding-side errors (bad arguments found before the library is called), one per thread like
 * the library's KVGetLastError(). kvswig_fail records a printf-style message and returns `code`;
 * kvswig_take_error returns the recorded message and clears it, or NULL when there is none. The
 * text stays valid on this thread until the next kvswig_fail. */
int kvswig_fail(int code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
const char* kvswig_take_error(void);
/* Forgets a recorded message (after a call that succeeded). */
void kvswig_clear_error(void);
#endif

int kvswig_init(KVStoreHandle store, int num, const int* keys, int nvals,
                const KVArrayHandle* vals);
int kvswig_init_str(KVStoreHandle store, int num, const char* const* keys, int nvals,
                    const KVArrayHandle* vals);
int kvswig_push(KVStoreHandle store, int num, const int* keys, int nvals,
                const KVArrayHandle* vals, int priority);
int kvswig_push_str(KVStoreHandle store, int num, const char* const* keys, int nvals,
                    const KVArrayHandle* vals, int priority);
int kvswig_pull(KVStoreHandle store, int num, const int* keys, int nouts,
                const KVArrayHandle* outs, int priority);
int kvswig_pull_str(KVStoreHandle store, int num, const char* const* keys, int nouts,
                    const KVArrayHandle* outs, int priority);
int kvswig_pushpull(KVStoreHandle store, int vnum, const int* vkeys, int nvals,
                    const KVArrayHandle* vals, int onum, const int* okeys, int nouts,
                    const KVArrayHandle* outs, int priority);
int kvswig_pushpull_str(KVStoreHandle store, int vnum, const char* const* vkeys, int nvals,
                        const KVArrayHandle* vals, int onum, const char* const* okeys,
                        int nouts, const KVArrayHandle* outs, int priority);
int kvswig_broadcast(KVStoreHandle store, int vnum, const int* vkeys, int nvals,
                     const KVArrayHandle* vals, int onum, const int* okeys, int nouts,
                     const KVArrayHandle* outs, int priority);
int kvswig_broadcast_str(KVStoreHandle store, int vnum, const char* const* vkeys, int nvals,
                         const KVArrayHandle* vals, int onum, const char* const* okeys,
                         int nouts, const KVArrayHandle* outs, int priority);
/* KVStoreSetGradientCompression's parameter names (vkeys) and values (okeys), each list with
 * its own length. */
int kvswig_set_gradient_compression(KVStoreHandle store, int vnum, const char* const* vkeys,
                                    int onum, const char* const* okeys);

/* KVStoreRowSparsePull(Str): outs and row_ids each pair with keys (one row_ids per output; a
 * language that offers one row_ids for many outputs repeats the handle). */
int kvswig_row_sparse_pull(KVStoreHandle store, int num, const int* keys, int nouts,
                           const KVArrayHandle* outs, int nrow_ids, const KVArrayHandle* row_ids,
                           int priority);
int kvswig_row_sparse_pull_str(KVStoreHandle store, int num, const char* const* keys,
                               int nouts, const KVArrayHandle* outs, int nrow_ids,
                               const KVArrayHandle* row_ids, int priority);

/* KVProfileGetStats as an output string (the languages copy it): the JSON text, in a buffer of
 * this thread that stays valid until its next call. */
int kvswig_profile_get_stats(const char** out_stats);

#ifdef __cplusplus
}
#endif

#endif /* KVSTORE_SWIG_LISTS_H_ */
