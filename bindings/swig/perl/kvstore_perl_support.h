/* kvstore_perl_support.h - the hand-written half of the Perl module KVStore::Raw.
 *
 * kvstore_perl.i holds the typemaps; everything they call lives in kvstore_perl_support.c,
 * compiled as an ordinary source of the module. Protocols:
 *
 * Argument errors. A conversion that fails sets $@ to "<fn>: <what> ..." and returns 0; the
 * typemap then SWIG_fail's, whose croak adds the caller's file and line. Lists and shapes are
 * malloc'ed copies (never NULL on success) that the typemap's freearg frees.
 *
 * Callbacks. A code ref becomes a registration (struct kvperl_callback) holding one counted
 * reference to the CV and the interpreter and thread that registered it. The trampolines call
 * the sub only on that thread (G_EVAL; a death is left in $KVStore::Raw::CALLBACK_ERROR and
 * fails the call); on any other thread they touch no Perl state and refuse the call. The free
 * hook drops the reference on the owner thread, or queues it for kvperl_drain_releases().
 *
 * SWIG's runtime is private to the generated wrapper, so the wrapper hands the two operations
 * on array handles that this code needs to kvperl_support_init() at boot.
 *
 * The declarations outside `#ifndef SWIG` are wrapped as Perl functions (TYPEMAPS.md).
 */
#ifndef KVSTORE_PERL_SUPPORT_H_
#define KVSTORE_PERL_SUPPORT_H_

#ifndef SWIG
#include <EXTERN.h>
#include <perl.h>
#include <stdint.h>

#include "kvstore/kvstore.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets $@ to a formatted message (needs aTHX in scope). */
#define KVPERL_SET_ERROR(...) sv_setpvf(get_sv("@", GV_ADD), __VA_ARGS__)

/* SWIG runtime adapters: a KVArrayHandle from a SWIG pointer SV (non-zero on success), and a
 * SWIG pointer stored into `sv`. */
typedef int (*kvperl_unwrap_fn)(pTHX_ SV* sv, void** out);
typedef void (*kvperl_wrap_fn)(pTHX_ SV* sv, void* ptr);
void kvperl_support_init(kvperl_unwrap_fn unwrap_array, kvperl_wrap_fn wrap_array);

/* "undef" or the string value of `sv`, for messages. */
const char* kvperl_show(pTHX_ SV* sv);

/* A single C string: undef gives NULL (the library reports KV_ERR_NULL_POINTER); a reference
 * that is not overloaded, or a string with a NUL inside (the C string would end there), is an
 * error. *out is Perl's UTF-8 buffer, valid during the call only. */
int kvperl_c_string(pTHX_ SV* in, const char* fn, const char* what, const char** out);

/* Array refs: [2, 3] dims; [3, 5] int keys (C int range); ['w', 'b'] string keys (one block:
 * the char* table, then private UTF-8 copies, so a callback cannot pull a string away under a
 * running call); [$h1, $h2] array handles (undef becomes NULL). */
int kvperl_shape(pTHX_ SV* in, const char* fn, int64_t** out, int* ndim);
int kvperl_int_list(pTHX_ SV* in, const char* fn, const char* what, int** out, int* count);
int kvperl_str_list(pTHX_ SV* in, const char* fn, const char* what, char*** out, int* count);
int kvperl_handle_list(pTHX_ SV* in, const char* fn, const char* what, KVArrayHandle** out,
                       int* count);
/* [4, 1, 7] int64 values (row ids); an empty list gives a table of no entries. */
int kvperl_int64_list(pTHX_ SV* in, const char* fn, const char* what, int64_t** out,
                      int64_t* count);

typedef struct kvperl_callback kvperl_callback;

/* A registration for `in` (a code ref), or *out NULL for undef; 0 with $@ set otherwise. */
int kvperl_callback_arg(pTHX_ SV* in, const char* fn, kvperl_callback** out);
/* Drops a registration the library does not own (never handed over, or refused); owner
 * thread only. */
void kvperl_callback_release_now(kvperl_callback* cb);

/* The trampolines (user_data: a kvperl_callback) and the free hook of every registration. */
int kvperl_updater(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data);
int kvperl_str_updater(const char* key, KVArrayHandle recv, KVArrayHandle stored,
                       void* user_data);
int kvperl_controller(int head, const char* body, void* user_data);
void kvperl_callback_free(void* user_data);

#ifdef __cplusplus
}
#endif
#endif /* !SWIG */

#ifdef __cplusplus
extern "C" {
#endif

/* Drops the references of registrations that the library released on a thread other than
 * their owner's; returns how many. Called by the Perl layer after KVStoreFree and
 * KVStoreSetUpdater; cheap when nothing is pending. */
int kvperl_drain_releases(void);

/* How many callback invocations were refused because they arrived on a thread that does not
 * own the Perl interpreter (each failed its push with KV_ERR_CALLBACK). */
long kvperl_foreign_callback_count(void);

/* Packed float16 bit patterns (pack 'S*') <-> packed float32 (pack 'f*'), rounding to nearest
 * even: the one binary16 conversion of the Perl binding. */
SV* kvperl_half_to_float(SV* packed);
SV* kvperl_float_to_half(SV* packed);

/* Self-test of the foreign-thread guard: registers `code` as the library would, then calls
 * the updater trampoline and the free hook from a new thread. Returns the trampoline's
 * status there (non-zero: refused without running Perl); the reference is released by the
 * next kvperl_drain_releases(). Returns -1 if `code` is not a code ref or no thread starts. */
int kvperl_selftest_foreign_thread(SV* code);

#ifdef __cplusplus
}
#endif

#endif /* KVSTORE_PERL_SUPPORT_H_ */
