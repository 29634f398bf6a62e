/* kvstore_perl.i - the Perl 5 part of the SWIG interface (included by ../kvstore.i under
 * SWIGPERL, before the public headers).
 *
 * The generated module is KVStore::Raw (`swig -perl5 -c++ -module KVStore::Raw`): one Perl
 * function per C function of kvstore.h, with the conversions below. The idiomatic layer
 * (KVStore, KVStore::NDArray, KVStore::Store) is pure Perl in bindings/perl/lib and is the
 * only caller of this module that users should need. TYPEMAPS.md beside this file is the
 * catalogue: what each typemap accepts and returns, and who frees what.
 *
 * Calling convention of the raw module: every fallible C function returns its int status
 * first, followed by its out-parameters (undef when the status is not 0):
 *     my ($rc, $array) = KVStore::Raw::KVArrayCreate([2, 3], KV_FLOAT32, KV_CPU, 0);
 * Malformed Perl input (not an array ref, a key that is not an integer, list lengths that
 * differ) croaks in the wrapper before the library is called.
 *
 * Callbacks. An updater or controller given as a Perl code ref is registered through a C
 * trampoline whose user_data (struct kvperl_callback) holds a counted reference to the CV and
 * the interpreter and thread that registered it. The library runs in-process updaters on
 * the thread that called push, which is that Perl thread, so the trampoline calls the sub
 * directly (G_EVAL). If it ever finds itself on another thread it does not touch Perl: it
 * counts the call and returns non-zero, which fails the push with KV_ERR_CALLBACK.
 */

/* The public header marks every function with KVSTORE_API, which is a GCC __attribute__
 * that SWIG's parser does not accept. This define lives only in SWIG's preprocessor. */
#define __attribute__(x)

%{
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/kvstore.h"

/* Class the updater's recv/stored views are blessed into, and the package variable in which
 * the trampoline leaves the exception of a sub that died (the Perl layer rethrows it). */
#define KVPERL_NDARRAY_CLASS "KVStore::NDArray"
#define KVPERL_ERROR_VAR "KVStore::Raw::CALLBACK_ERROR"

/* Non-zero statuses the trampolines return to the library (any non-zero fails the push). */
#define KVPERL_RC_DIED 1
#define KVPERL_RC_FOREIGN_THREAD 2

/* Sets $@ to a formatted message; the typemaps then `SWIG_fail`, whose croak adds the
 * caller's file and line. */
#define KVPERL_SET_ERROR(...) sv_setpvf(get_sv("@", GV_ADD), __VA_ARGS__)

/* ---------------------------------------------------------------------------------------- */
/* Scalar and list conversions                                                               */
/* ---------------------------------------------------------------------------------------- */

/* An integral number in [lo, hi]. Accepts IVs, UVs, integral NVs and numeric strings. */
static int kvperl_sv_to_i64(pTHX_ SV* sv, int64_t lo, int64_t hi, int64_t* out) {
  if (sv == NULL || !SvOK(sv) || (SvROK(sv) && !SvAMAGIC(sv))) return 0;
  if (SvIOK(sv) && !SvNOK(sv) && !SvPOK(sv)) {
    if (SvIsUV(sv)) {
      UV u = SvUV(sv);
      if (u > (UV)INT64_MAX || (int64_t)u > hi) return 0;
      *out = (int64_t)u;
      return 1;
    }
    IV v = SvIV(sv);
    if (v < lo || v > hi) return 0;
    *out = (int64_t)v;
    return 1;
  }
  if (!looks_like_number(sv)) return 0;
  NV nv = SvNV(sv);
  if (nv != nv || nv != floor(nv)) return 0; /* NaN or fractional */
  if (nv < -9223372036854775808.0 || nv >= 9223372036854775808.0) return 0;
  int64_t v = (int64_t)nv;
  if (v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

/* The element count of an array ref, or -1 (with $@ set) when `in` is not one. */
static SSize_t kvperl_av_len(pTHX_ SV* in, const char* fn, const char* what, AV** out) {
  if (in == NULL || !SvROK(in) || SvTYPE(SvRV(in)) != SVt_PVAV) {
    KVPERL_SET_ERROR("%s: %s must be an array reference", fn, what);
    return -1;
  }
  *out = (AV*)SvRV(in);
  SSize_t n = av_len(*out) + 1;
  if (n > INT_MAX) {
    KVPERL_SET_ERROR("%s: %s has too many elements", fn, what);
    return -1;
  }
  return n;
}

static const char* kvperl_show(pTHX_ SV* sv) {
  return (sv == NULL || !SvOK(sv)) ? "undef" : SvPV_nolen(sv);
}

/* Array ref of integers -> malloc'ed int[] (never NULL on success) and its length. */
static int kvperl_int_list(pTHX_ SV* in, const char* fn, const char* what, int** out,
                           int* count) {
  AV* av;
  SSize_t n = kvperl_av_len(aTHX_ in, fn, what, &av);
  if (n < 0) return 0;
  int* buf = (int*)malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (buf == NULL) {
    KVPERL_SET_ERROR("%s: out of memory", fn);
    return 0;
  }
  for (SSize_t i = 0; i < n; ++i) {
    SV** e = av_fetch(av, i, 0);
    int64_t v;
    if (!kvperl_sv_to_i64(aTHX_ e ? *e : NULL, INT_MIN, INT_MAX, &v)) {
      KVPERL_SET_ERROR("%s: %s[%ld] is not an int key ('%s')", fn, what, (long)i,
                       kvperl_show(aTHX_ e ? *e : NULL));
      free(buf);
      return 0;
    }
    buf[i] = (int)v;
  }
  *out = buf;
  *count = (int)n;
  return 1;
}

/* Array ref of strings -> one malloc'ed block holding the char* table followed by private
 * UTF-8 copies of the strings (the library never sees Perl's buffers, so a callback that
 * changes the caller's key list cannot pull a string away under a running call). */
static int kvperl_str_list(pTHX_ SV* in, const char* fn, const char* what, char*** out,
                           int* count) {
  AV* av;
  SSize_t n = kvperl_av_len(aTHX_ in, fn, what, &av);
  if (n < 0) return 0;
  size_t total = sizeof(char*) * (size_t)(n ? n : 1);
  for (SSize_t i = 0; i < n; ++i) {
    SV** e = av_fetch(av, i, 0);
    if (e == NULL || !SvOK(*e) || (SvROK(*e) && !SvAMAGIC(*e))) {
      KVPERL_SET_ERROR("%s: %s[%ld] is not a string key ('%s')", fn, what, (long)i,
                       kvperl_show(aTHX_ e ? *e : NULL));
      return 0;
    }
    STRLEN len;
    const char* s = SvPVutf8(*e, len);
    if (memchr(s, '\0', len) != NULL) {
      KVPERL_SET_ERROR("%s: %s[%ld] contains a NUL character", fn, what, (long)i);
      return 0;
    }
    total += len + 1;
  }
  char** table = (char**)malloc(total);
  if (table == NULL) {
    KVPERL_SET_ERROR("%s: out of memory", fn);
    return 0;
  }
  char* text = (char*)(table + (n ? n : 1));
  for (SSize_t i = 0; i < n; ++i) {
    STRLEN len;
    const char* s = SvPVutf8(*av_fetch(av, i, 0), len);
    memcpy(text, s, len);
    text[len] = '\0';
    table[i] = text;
    text += len + 1;
  }
  *out = table;
  *count = (int)n;
  return 1;
}

/* Array ref of KVArrayHandle (SWIG pointers; undef becomes NULL, which the library reports
 * as KV_ERR_NULL_POINTER) -> malloc'ed table. Slot 0 of the block holds the element count
 * and the returned pointer starts at slot 1, so that the check typemaps can compare the
 * list's length with the key count of the same call (see kvperl_handle_count). */
static int kvperl_handle_list(pTHX_ SV* in, const char* fn, const char* what,
                              swig_type_info* type, KVArrayHandle** out) {
  AV* av;
  SSize_t n = kvperl_av_len(aTHX_ in, fn, what, &av);
  if (n < 0) return 0;
  KVArrayHandle* block = (KVArrayHandle*)malloc(sizeof(KVArrayHandle) * (size_t)(n + 1));
  if (block == NULL) {
    KVPERL_SET_ERROR("%s: out of memory", fn);
    return 0;
  }
  block[0] = (KVArrayHandle)(uintptr_t)n;
  for (SSize_t i = 0; i < n; ++i) {
    SV** e = av_fetch(av, i, 0);
    void* p = NULL;
    if (e != NULL && SvOK(*e) && !SWIG_IsOK(SWIG_ConvertPtr(*e, &p, type, 0))) {
      KVPERL_SET_ERROR("%s: %s[%ld] is not an array handle ('%s')", fn, what, (long)i,
                       kvperl_show(aTHX_ *e));
      free(block);
      return 0;
    }
    block[i + 1] = (KVArrayHandle)p;
  }
  *out = block + 1;
  return 1;
}

static SSize_t kvperl_handle_count(const KVArrayHandle* list) {
  return (SSize_t)(uintptr_t)list[-1];
}

static void kvperl_handle_list_free(const KVArrayHandle* list) {
  if (list != NULL) free((void*)(list - 1));
}

/* Array ref of int64 dims -> malloc'ed int64_t[] and its length. */
static int kvperl_shape(pTHX_ SV* in, const char* fn, int64_t** out, int* ndim) {
  AV* av;
  SSize_t n = kvperl_av_len(aTHX_ in, fn, "shape", &av);
  if (n < 0) return 0;
  int64_t* buf = (int64_t*)malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (buf == NULL) {
    KVPERL_SET_ERROR("%s: out of memory", fn);
    return 0;
  }
  for (SSize_t i = 0; i < n; ++i) {
    SV** e = av_fetch(av, i, 0);
    int64_t v;
    if (!kvperl_sv_to_i64(aTHX_ e ? *e : NULL, INT64_MIN, INT64_MAX, &v)) {
      KVPERL_SET_ERROR("%s: shape[%ld] is not an integer ('%s')", fn, (long)i,
                       kvperl_show(aTHX_ e ? *e : NULL));
      free(buf);
      return 0;
    }
    buf[i] = v;
  }
  *out = buf;
  *ndim = (int)n;
  return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* Callbacks: registration record, trampolines, deferred release                             */
/* ---------------------------------------------------------------------------------------- */

typedef struct kvperl_callback {
  SV* code;                     /* the CV, with one reference owned by this record */
  void* owner;                  /* PerlInterpreter* that registered it (NULL w/o MULTIPLICITY) */
  pthread_t thread;             /* the thread that registered it */
  struct kvperl_callback* next; /* link in the deferred-release list */
} kvperl_callback;

static pthread_mutex_t kvperl_pending_lock = PTHREAD_MUTEX_INITIALIZER;
static kvperl_callback* kvperl_pending = NULL; /* released on a foreign thread, not yet dec'd */
static long kvperl_foreign_calls = 0;          /* trampoline calls refused (atomic) */

/* True when the calling thread is the Perl thread (and interpreter) that registered `cb`. */
static int kvperl_on_owner(const kvperl_callback* cb) {
  if (!pthread_equal(pthread_self(), cb->thread)) return 0;
#ifdef MULTIPLICITY
  if ((void*)PERL_GET_CONTEXT != cb->owner) return 0;
#endif
  return 1;
}

/* A registration for the code ref `code` (checked by the caller), owned by the caller until
 * it hands it to the library. */
static kvperl_callback* kvperl_callback_new(pTHX_ SV* code) {
  kvperl_callback* cb = (kvperl_callback*)calloc(1, sizeof(*cb));
  if (cb == NULL) return NULL;
  cb->code = SvREFCNT_inc_simple_NN(SvRV(code));
#ifdef MULTIPLICITY
  cb->owner = (void*)aTHX;
#endif
  cb->thread = pthread_self();
  return cb;
}

/* Drops the record's reference; only on the owner thread. */
static void kvperl_callback_release_now(kvperl_callback* cb) {
  dTHXa((PerlInterpreter*)cb->owner);
  SvREFCNT_dec(cb->code);
  free(cb);
}

/* KVFreeFn of every Perl registration. On the owner thread the reference is dropped at
 * once; a release on any other thread (which must not touch Perl) is queued and dropped by
 * kvperl_drain_releases() on the owner thread, which the Perl layer calls after
 * KVStoreFree and KVStoreSetUpdater. */
static void kvperl_callback_free(void* user_data) {
  kvperl_callback* cb = (kvperl_callback*)user_data;
  if (cb == NULL) return;
  if (kvperl_on_owner(cb)) {
    kvperl_callback_release_now(cb);
    return;
  }
  pthread_mutex_lock(&kvperl_pending_lock);
  cb->next = kvperl_pending;
  kvperl_pending = cb;
  pthread_mutex_unlock(&kvperl_pending_lock);
}

/* A KVStore::NDArray object that borrows `h` ({handle => ptr, view => 1}); it never frees
 * the array. */
static SV* kvperl_view_new(pTHX_ KVArrayHandle h) {
  HV* hv = newHV();
  SV* ptr = newSV(0);
  SWIG_MakePtr(ptr, (void*)h, SWIGTYPE_p_KVArray_, 0);
  (void)hv_stores(hv, "handle", ptr);
  (void)hv_stores(hv, "view", newSViv(1));
  return sv_bless(newRV_noinc((SV*)hv), gv_stashpv(KVPERL_NDARRAY_CLASS, GV_ADD));
}

/* Detaches a view from its array once the callback has returned: a view kept past the call
 * (stored in a global, say) then croaks on use instead of reaching a freed array. */
static void kvperl_view_end(pTHX_ HV* hv) {
  (void)hv_stores(hv, "handle", newSV(0));
}

/* A Perl string for a UTF-8 key the library hands back (the binding sent it as UTF-8). */
static SV* kvperl_key_sv(pTHX_ const char* key) {
  STRLEN len = strlen(key);
  SV* sv = newSVpvn(key, len);
  if (!is_utf8_invariant_string((const U8*)key, len) && is_utf8_string((const U8*)key, len))
    SvUTF8_on(sv);
  return sv;
}

/* Calls cb->code with its arguments: the int `ival` (when `with_int`), then the UTF-8 string
 * `sval` (when not NULL), then, for updaters, views of recv/stored. Every temporary lives in
 * this call's own SAVETMPS scope. Returns 0, or KVPERL_RC_DIED after copying $@ into
 * $KVStore::Raw::CALLBACK_ERROR. */
static int kvperl_invoke(pTHX_ kvperl_callback* cb, int with_int, int ival, const char* sval,
                         KVArrayHandle recv, KVArrayHandle stored, int with_arrays) {
  int rc = 0;
  HV* views[2] = {NULL, NULL};
  dSP;
  ENTER;
  SAVETMPS;
  PUSHMARK(SP);
  EXTEND(SP, 4);
  if (with_int) PUSHs(sv_2mortal(newSViv(ival)));
  if (sval != NULL) PUSHs(sv_2mortal(kvperl_key_sv(aTHX_ sval)));
  if (with_arrays) {
    SV* vr = sv_2mortal(kvperl_view_new(aTHX_ recv));
    SV* vs = sv_2mortal(kvperl_view_new(aTHX_ stored));
    views[0] = (HV*)SvREFCNT_inc_simple_NN(SvRV(vr));
    views[1] = (HV*)SvREFCNT_inc_simple_NN(SvRV(vs));
    PUSHs(vr);
    PUSHs(vs);
  }
  PUTBACK;
  (void)call_sv(cb->code, G_DISCARD | G_EVAL);
  SPAGAIN;
  if (SvTRUE(ERRSV)) {
    sv_setsv(get_sv(KVPERL_ERROR_VAR, GV_ADD), ERRSV);
    rc = KVPERL_RC_DIED;
  }
  for (int i = 0; i < 2; ++i) {
    if (views[i] != NULL) {
      kvperl_view_end(aTHX_ views[i]);
      SvREFCNT_dec((SV*)views[i]);
    }
  }
  PUTBACK;
  FREETMPS;
  LEAVE;
  return rc;
}

static int kvperl_refuse_foreign(void) {
  __atomic_add_fetch(&kvperl_foreign_calls, 1, __ATOMIC_RELAXED);
  return KVPERL_RC_FOREIGN_THREAD;
}

/* KVUpdater trampoline: the sub gets ($key, $recv, $stored). */
static int kvperl_updater(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  kvperl_callback* cb = (kvperl_callback*)user_data;
  if (cb == NULL || !kvperl_on_owner(cb)) return kvperl_refuse_foreign();
  dTHXa((PerlInterpreter*)cb->owner);
  return kvperl_invoke(aTHX_ cb, 1, key, NULL, recv, stored, 1);
}

/* KVStrUpdater trampoline: the sub gets ($key_string, $recv, $stored). */
static int kvperl_str_updater(const char* key, KVArrayHandle recv, KVArrayHandle stored,
                              void* user_data) {
  kvperl_callback* cb = (kvperl_callback*)user_data;
  if (cb == NULL || !kvperl_on_owner(cb)) return kvperl_refuse_foreign();
  dTHXa((PerlInterpreter*)cb->owner);
  return kvperl_invoke(aTHX_ cb, 0, 0, key ? key : "", recv, stored, 1);
}

/* KVController trampoline: the sub gets ($head, $body). */
static int kvperl_controller(int head, const char* body, void* user_data) {
  kvperl_callback* cb = (kvperl_callback*)user_data;
  if (cb == NULL || !kvperl_on_owner(cb)) return kvperl_refuse_foreign();
  dTHXa((PerlInterpreter*)cb->owner);
  return kvperl_invoke(aTHX_ cb, 1, head, body ? body : "", NULL, NULL, 0);
}

/* A registration for `in` (a code ref), or NULL for undef; sets $@ and returns 0 otherwise. */
static int kvperl_callback_arg(pTHX_ SV* in, const char* fn, kvperl_callback** out) {
  *out = NULL;
  if (in == NULL || !SvOK(in)) return 1;
  if (!SvROK(in) || SvTYPE(SvRV(in)) != SVt_PVCV) {
    KVPERL_SET_ERROR("%s: the callback must be a code reference or undef ('%s')", fn,
                     kvperl_show(aTHX_ in));
    return 0;
  }
  *out = kvperl_callback_new(aTHX_ in);
  if (*out == NULL) {
    KVPERL_SET_ERROR("%s: out of memory", fn);
    return 0;
  }
  return 1;
}

/* Thread body of kvperl_selftest_foreign_thread (below). */
static void* kvperl_selftest_thread(void* arg) {
  kvperl_callback* cb = (kvperl_callback*)arg;
  intptr_t rc = kvperl_updater(7, NULL, NULL, cb);
  kvperl_callback_free(cb); /* queued: this thread must not touch Perl */
  return (void*)rc;
}

/* ---------------------------------------------------------------------------------------- */
/* float16 <-> float32 (IEEE binary16 bit patterns, round to nearest even)                   */
/* ---------------------------------------------------------------------------------------- */

static float kvperl_half_to_float1(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    float f = ldexpf((float)man, -24); /* zero or subnormal */
    return sign ? -f : f;
  }
  if (exp == 31)
    bits = sign | 0x7f800000u | (man << 13);
  else
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint16_t kvperl_float_to_half1(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504: inf */
  if (a < 0x38800000u) {                                   /* below 2^-14: subnormal */
    if (a < 0x33000000u) return (uint16_t)sign;            /* at most 2^-25: zero */
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return (uint16_t)(sign | q);
  }
  uint32_t h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13);
  uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}
%}

/* ---------------------------------------------------------------------------------------- */
/* Out-parameters: not passed from Perl, returned after the status                           */
/* ---------------------------------------------------------------------------------------- */

%typemap(in, numinputs=0) KVArrayHandle* out (KVArrayHandle temp = NULL),
                          KVStoreHandle* out (KVStoreHandle temp = NULL) {
  $1 = &temp;
}
%typemap(argout) KVArrayHandle* out, KVStoreHandle* out {
  if (argvi >= items) EXTEND(sp, argvi + 1);
  if (result == 0 && *$1 != NULL)
    $result = SWIG_NewPointerObj(SWIG_as_voidptr(*$1), $*1_descriptor, 0);
  else
    $result = &PL_sv_undef;
  argvi++;
}

%typemap(in, numinputs=0) int* out_count (int temp = 0), int* out_ndim (int temp = 0),
                          int* out_dtype (int temp = 0), int* out_dev_type (int temp = 0),
                          int* out_dev_id (int temp = 0), int* out_rank (int temp = 0),
                          int* out_size (int temp = 0), int* out_number (int temp = 0) {
  $1 = &temp;
}
%typemap(argout) int* out_count, int* out_ndim, int* out_dtype, int* out_dev_type,
                 int* out_dev_id, int* out_rank, int* out_size, int* out_number {
  if (argvi >= items) EXTEND(sp, argvi + 1);
  $result = (result == 0) ? sv_2mortal(newSViv(*$1)) : &PL_sv_undef;
  argvi++;
}

%typemap(in, numinputs=0) int64_t* out_size (int64_t temp = 0) { $1 = &temp; }
%typemap(argout) int64_t* out_size {
  if (argvi >= items) EXTEND(sp, argvi + 1);
  $result = (result == 0) ? sv_2mortal(newSViv((IV)*$1)) : &PL_sv_undef;
  argvi++;
}

%typemap(in, numinputs=0) size_t* out_nbytes (size_t temp = 0) { $1 = &temp; }
%typemap(argout) size_t* out_nbytes {
  if (argvi >= items) EXTEND(sp, argvi + 1);
  $result = (result == 0) ? sv_2mortal(newSVuv((UV)*$1)) : &PL_sv_undef;
  argvi++;
}

/* The data address of a CPU array, as an integer (for zero-copy users such as PDL). */
%typemap(in, numinputs=0) void** out_data (void* temp = NULL) { $1 = &temp; }
%typemap(argout) void** out_data {
  if (argvi >= items) EXTEND(sp, argvi + 1);
  $result = (result == 0) ? sv_2mortal(newSVuv(PTR2UV(*$1))) : &PL_sv_undef;
  argvi++;
}

/* Library-owned string (valid while the store lives): copied into a Perl string. */
%typemap(in, numinputs=0) const char** out_type (const char* temp = NULL) { $1 = ($1_ltype)&temp; }
%typemap(argout) const char** out_type {
  if (argvi >= items) EXTEND(sp, argvi + 1);
  $result = (result == 0 && *$1 != NULL) ? sv_2mortal(newSVpv(*$1, 0)) : &PL_sv_undef;
  argvi++;
}

/* KVArrayGetShape: returns an array ref of dims. */
%typemap(in, numinputs=0) (int64_t* out_dims, int capacity, int* out_ndim)
    (int64_t dims[KV_MAX_NDIM], int ndim = 0) {
  $1 = dims;
  $2 = KV_MAX_NDIM;
  $3 = &ndim;
}
%typemap(argout) (int64_t* out_dims, int capacity, int* out_ndim) {
  if (argvi >= items) EXTEND(sp, argvi + 1);
  if (result == 0) {
    AV* av = newAV();
    for (int i = 0; i < *$3; ++i) av_push(av, newSViv((IV)$1[i]));
    $result = sv_2mortal(newRV_noinc((SV*)av));
  } else {
    $result = &PL_sv_undef;
  }
  argvi++;
}

/* ---------------------------------------------------------------------------------------- */
/* Inputs from array refs and packed strings                                                 */
/* ---------------------------------------------------------------------------------------- */

/* Single C strings (store type, optimizer spec, command body): sent as UTF-8. A NUL inside
 * would end the C string early (the library would act on a prefix the caller never wrote),
 * so it croaks instead. undef passes NULL, which the library reports as KV_ERR_NULL_POINTER.
 * The pointer is Perl's buffer, read during the call only. */
%typemap(in) const char* type, const char* spec, const char* body {
  {
    $1 = NULL;
    if (SvOK($input)) {
      STRLEN len;
      if (SvROK($input) && !SvAMAGIC($input)) {
        KVPERL_SET_ERROR("$symname: $1_name must be a string ('%s')", kvperl_show(aTHX_ $input));
        SWIG_fail;
      }
      $1 = ($1_ltype)SvPVutf8($input, len);
      if (memchr($1, '\0', len) != NULL) {
        KVPERL_SET_ERROR("$symname: $1_name contains a NUL character");
        SWIG_fail;
      }
    }
  }
}

/* Shapes: [2, 3]. */
%typemap(in) (const int64_t* shape, int ndim) {
  if (!kvperl_shape(aTHX_ $input, "$symname", &$1, &$2)) SWIG_fail;
}
%typemap(freearg) (const int64_t* shape, int ndim) { free((void*)$1); }

/* Int key lists: [3, 5, 7]. */
%typemap(in) (int num, const int* keys), (int vnum, const int* vkeys),
             (int onum, const int* okeys) {
  {
    int* list = NULL;
    if (!kvperl_int_list(aTHX_ $input, "$symname", "$2_name", &list, &$1)) SWIG_fail;
    $2 = ($2_ltype)list;
  }
}
%typemap(freearg) (int num, const int* keys), (int vnum, const int* vkeys),
                  (int onum, const int* okeys) {
  free((void*)$2);
}

/* String key lists: ['w', 'b']. */
%typemap(in) (int num, const char* const* keys), (int vnum, const char* const* vkeys),
             (int onum, const char* const* okeys) {
  {
    char** list = NULL;
    if (!kvperl_str_list(aTHX_ $input, "$symname", "$2_name", &list, &$1)) SWIG_fail;
    $2 = ($2_ltype)list;
  }
}
%typemap(freearg) (int num, const char* const* keys), (int vnum, const char* const* vkeys),
                  (int onum, const char* const* okeys) {
  free((void*)$2);
}

/* Handle lists: [$h1, $h2]. */
%typemap(in) const KVArrayHandle* vals, const KVArrayHandle* outs {
  {
    KVArrayHandle* list = NULL;
    if (!kvperl_handle_list(aTHX_ $input, "$symname", "$1_name", $descriptor(KVArrayHandle),
                            &list))
      SWIG_fail;
    $1 = ($1_ltype)list;
  }
}
%typemap(freearg) const KVArrayHandle* vals, const KVArrayHandle* outs {
  kvperl_handle_list_free($1);
}

/* Every handle list must be exactly as long as the key list it pairs with. */
%define KVPERL_COUNT_CHECK(NUM, KEYTYPE, KEYS, LIST)
%typemap(check) (int NUM, KEYTYPE KEYS, const KVArrayHandle* LIST) {
  if (kvperl_handle_count($3) != (SSize_t)$1) {
    KVPERL_SET_ERROR("$symname: " #LIST " has %ld elements but " #KEYS " has %d",
                     (long)kvperl_handle_count($3), $1);
    SWIG_fail;
  }
}
%enddef
KVPERL_COUNT_CHECK(num, const int*, keys, vals)
KVPERL_COUNT_CHECK(num, const int*, keys, outs)
KVPERL_COUNT_CHECK(vnum, const int*, vkeys, vals)
KVPERL_COUNT_CHECK(onum, const int*, okeys, outs)
KVPERL_COUNT_CHECK(num, const char* const*, keys, vals)
KVPERL_COUNT_CHECK(num, const char* const*, keys, outs)
KVPERL_COUNT_CHECK(vnum, const char* const*, vkeys, vals)
KVPERL_COUNT_CHECK(onum, const char* const*, okeys, outs)

/* Host data in: a packed byte string (pack 'f*', ...), read during the call only. */
%typemap(in) (const void* data, size_t nbytes) {
  {
    STRLEN len = 0;
    if (!SvOK($input) || SvROK($input)) {
      KVPERL_SET_ERROR("$symname: data must be a packed byte string");
      SWIG_fail;
    }
    $1 = ($1_ltype)SvPVbyte($input, len);
    $2 = (size_t)len;
  }
}

/* Host data out: only the array is passed; a new Perl string sized to the array's byte size
 * is filled by the library and returned after the status. */
%typemap(in) (KVArrayHandle array, void* data, size_t nbytes) (SV* buffer = NULL) {
  {
    void* p = NULL;
    if (SvOK($input) && !SWIG_IsOK(SWIG_ConvertPtr($input, &p, $descriptor(KVArrayHandle), 0))) {
      KVPERL_SET_ERROR("$symname: array is not an array handle ('%s')",
                       kvperl_show(aTHX_ $input));
      SWIG_fail;
    }
    $1 = (KVArrayHandle)p;
    $2 = NULL;
    $3 = 0;
    size_t n = 0;
    if ($1 != NULL && KVArrayGetNBytes($1, &n) == 0) {
      buffer = sv_2mortal(newSV(n + 1));
      SvPOK_only(buffer);
      SvCUR_set(buffer, n);
      *SvEND(buffer) = '\0';
      $2 = (void*)SvPVX(buffer);
      $3 = n;
    }
  }
}
%typemap(argout) (KVArrayHandle array, void* data, size_t nbytes) {
  if (argvi >= items) EXTEND(sp, argvi + 1);
  $result = (result == 0 && buffer$argnum != NULL) ? buffer$argnum : &PL_sv_undef;
  argvi++;
}

/* ---------------------------------------------------------------------------------------- */
/* Callbacks from code refs                                                                  */
/* ---------------------------------------------------------------------------------------- */

/* Updaters: a code ref (called as $sub->($key, $recv_view, $stored_view)) or undef (the
 * default, assign). On success the library owns the registration and runs
 * kvperl_callback_free exactly once; on failure or a croak the wrapper frees it. */
%typemap(in) (KVUpdater updater, void* user_data, KVFreeFn free_fn) {
  {
    kvperl_callback* cb = NULL;
    if (!kvperl_callback_arg(aTHX_ $input, "$symname", &cb)) SWIG_fail;
    $1 = cb ? kvperl_updater : NULL;
    $2 = (void*)cb;
    $3 = cb ? kvperl_callback_free : NULL;
  }
}
%typemap(in) (KVStrUpdater updater, void* user_data, KVFreeFn free_fn) {
  {
    kvperl_callback* cb = NULL;
    if (!kvperl_callback_arg(aTHX_ $input, "$symname", &cb)) SWIG_fail;
    $1 = cb ? kvperl_str_updater : NULL;
    $2 = (void*)cb;
    $3 = cb ? kvperl_callback_free : NULL;
  }
}
%typemap(argout) (KVUpdater updater, void* user_data, KVFreeFn free_fn),
                 (KVStrUpdater updater, void* user_data, KVFreeFn free_fn) {
  if (result == 0) $2 = NULL; /* the store owns it now */
}
%typemap(freearg) (KVUpdater updater, void* user_data, KVFreeFn free_fn),
                  (KVStrUpdater updater, void* user_data, KVFreeFn free_fn) {
  if ($2 != NULL) kvperl_callback_release_now((kvperl_callback*)$2);
}

/* Server controller: borrowed for the blocking call only, released when it returns. */
%typemap(in) (KVController controller, void* user_data) {
  {
    kvperl_callback* cb = NULL;
    if (!kvperl_callback_arg(aTHX_ $input, "$symname", &cb)) SWIG_fail;
    $1 = cb ? kvperl_controller : NULL;
    $2 = (void*)cb;
  }
}
%typemap(freearg) (KVController controller, void* user_data) {
  if ($2 != NULL) kvperl_callback_release_now((kvperl_callback*)$2);
}

/* ---------------------------------------------------------------------------------------- */
/* Helpers of the Perl layer (names start with kvperl_)                                      */
/* ---------------------------------------------------------------------------------------- */

%inline %{
/* Drops the references of registrations that the library released on a thread other than
 * their owner's; returns how many. Called by the Perl layer after KVStoreFree and
 * KVStoreSetUpdater; cheap when nothing is pending. */
int kvperl_drain_releases(void) {
  kvperl_callback* mine = NULL;
  kvperl_callback** link;
  int n = 0;
  pthread_mutex_lock(&kvperl_pending_lock);
  link = &kvperl_pending;
  while (*link != NULL) {
    kvperl_callback* cb = *link;
    if (kvperl_on_owner(cb)) {
      *link = cb->next;
      cb->next = mine;
      mine = cb;
    } else {
      link = &cb->next;
    }
  }
  pthread_mutex_unlock(&kvperl_pending_lock);
  while (mine != NULL) {
    kvperl_callback* next = mine->next;
    kvperl_callback_release_now(mine);
    mine = next;
    ++n;
  }
  return n;
}

/* How many callback invocations were refused because they arrived on a thread that does not
 * own the Perl interpreter (each failed its push with KV_ERR_CALLBACK). */
long kvperl_foreign_callback_count(void) {
  return __atomic_load_n(&kvperl_foreign_calls, __ATOMIC_RELAXED);
}

/* Packed float16 bit patterns (pack 'S*') -> packed float32 (pack 'f*'). */
SV* kvperl_half_to_float(SV* packed) {
  dTHX;
  STRLEN len = 0;
  const char* in = SvPVbyte(packed, len);
  size_t n = len / 2;
  SV* out = sv_2mortal(newSV(n * 4 + 1));
  SvPOK_only(out);
  float* dst = (float*)SvPVX(out);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    memcpy(&h, in + 2 * i, 2);
    dst[i] = kvperl_half_to_float1(h);
  }
  SvCUR_set(out, n * 4);
  *SvEND(out) = '\0';
  return out;
}

/* Packed float32 -> packed float16 bit patterns, rounding to nearest even. */
SV* kvperl_float_to_half(SV* packed) {
  dTHX;
  STRLEN len = 0;
  const char* in = SvPVbyte(packed, len);
  size_t n = len / 4;
  SV* out = sv_2mortal(newSV(n * 2 + 1));
  SvPOK_only(out);
  char* dst = SvPVX(out);
  for (size_t i = 0; i < n; ++i) {
    float f;
    memcpy(&f, in + 4 * i, 4);
    uint16_t h = kvperl_float_to_half1(f);
    memcpy(dst + 2 * i, &h, 2);
  }
  SvCUR_set(out, n * 2);
  *SvEND(out) = '\0';
  return out;
}


/* Self-test of the foreign-thread guard: registers `code` as the library would, then calls
 * the updater trampoline and the free hook from a new thread. Returns the trampoline's
 * status there (non-zero: refused without running Perl); the reference is released by the
 * next kvperl_drain_releases(). Returns -1 if `code` is not a code ref or no thread starts. */
int kvperl_selftest_foreign_thread(SV* code) {
  dTHX;
  pthread_t t;
  void* rc = NULL;
  kvperl_callback* cb;
  if (!SvROK(code) || SvTYPE(SvRV(code)) != SVt_PVCV) return -1;
  cb = kvperl_callback_new(aTHX_ code);
  if (cb == NULL) return -1;
  if (pthread_create(&t, NULL, kvperl_selftest_thread, cb) != 0) {
    kvperl_callback_release_now(cb);
    return -1;
  }
  pthread_join(t, &rc);
  return (int)(intptr_t)rc;
}
%}
