/* kvstore_perl_support.c - the hand-written half of the Perl module KVStore::Raw: argument
 * conversion, callback registrations and trampolines, float16 packing. The typemaps of
 * kvstore_perl.i call it; see kvstore_perl_support.h for the protocols. */
#define PERL_NO_GET_CONTEXT
#include "kvstore_perl_support.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Classes the updater's recv/stored views are blessed into (dense, row_sparse), and the
 * package variable in which the trampoline leaves the exception of a sub that died (the Perl
 * layer rethrows it). */
#define KVPERL_NDARRAY_CLASS "KVStore::NDArray"
#define KVPERL_ROW_SPARSE_CLASS "KVStore::NDArray::RowSparse"
#define KVPERL_ERROR_VAR "KVStore::Raw::CALLBACK_ERROR"

/* Non-zero statuses the trampolines return to the library (any non-zero fails the push). */
#define KVPERL_RC_DIED 1
#define KVPERL_RC_FOREIGN_THREAD 2

/* The wrapper's SWIG runtime adapters (kvperl_support_init). */
static struct {
  kvperl_unwrap_fn unwrap_array;
  kvperl_wrap_fn wrap_array;
} kvperl_swig;

void kvperl_support_init(kvperl_unwrap_fn unwrap_array, kvperl_wrap_fn wrap_array) {
  kvperl_swig.unwrap_array = unwrap_array;
  kvperl_swig.wrap_array = wrap_array;
}

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

const char* kvperl_show(pTHX_ SV* sv) {
  return (sv == NULL || !SvOK(sv)) ? "undef" : SvPV_nolen(sv);
}

/* A single C string argument (see the header). */
int kvperl_c_string(pTHX_ SV* in, const char* fn, const char* what, const char** out) {
  *out = NULL;
  if (in == NULL || !SvOK(in)) return 1;
  if (SvROK(in) && !SvAMAGIC(in)) {
    KVPERL_SET_ERROR("%s: %s must be a string ('%s')", fn, what, kvperl_show(aTHX_ in));
    return 0;
  }
  STRLEN len;
  const char* s = SvPVutf8(in, len);
  if (memchr(s, '\0', len) != NULL) {
    KVPERL_SET_ERROR("%s: %s contains a NUL character", fn, what);
    return 0;
  }
  *out = s;
  return 1;
}

/* Converts element `i` of list `what` (e may be NULL) into `slot`; 0 with $@ set otherwise. */
typedef int (*kvperl_elem_fn)(pTHX_ SV* e, const char* fn, const char* what, SSize_t i,
                              void* slot);

/* Array ref -> malloc'ed table of `elem_size` entries (never NULL on success), each filled by
 * `conv`, and its length. */
static int kvperl_table(pTHX_ SV* in, const char* fn, const char* what, size_t elem_size,
                        kvperl_elem_fn conv, void** out, int* count) {
  AV* av;
  SSize_t n = kvperl_av_len(aTHX_ in, fn, what, &av);
  if (n < 0) return 0;
  char* table = (char*)malloc(elem_size * (size_t)(n ? n : 1));
  if (table == NULL) {
    KVPERL_SET_ERROR("%s: out of memory", fn);
    return 0;
  }
  for (SSize_t i = 0; i < n; ++i) {
    SV** e = av_fetch(av, i, 0);
    if (!conv(aTHX_ e ? *e : NULL, fn, what, i, table + (size_t)i * elem_size)) {
      free(table);
      return 0;
    }
  }
  *out = table;
  *count = (int)n;
  return 1;
}

static int kvperl_int_elem(pTHX_ SV* e, const char* fn, const char* what, SSize_t i,
                           void* slot) {
  int64_t v;
  if (!kvperl_sv_to_i64(aTHX_ e, INT_MIN, INT_MAX, &v)) {
    KVPERL_SET_ERROR("%s: %s[%ld] is not an int key ('%s')", fn, what, (long)i,
                     kvperl_show(aTHX_ e));
    return 0;
  }
  *(int*)slot = (int)v;
  return 1;
}

static int kvperl_dim_elem(pTHX_ SV* e, const char* fn, const char* what, SSize_t i,
                           void* slot) {
  int64_t v;
  if (!kvperl_sv_to_i64(aTHX_ e, INT64_MIN, INT64_MAX, &v)) {
    KVPERL_SET_ERROR("%s: %s[%ld] is not an integer ('%s')", fn, what, (long)i,
                     kvperl_show(aTHX_ e));
    return 0;
  }
  *(int64_t*)slot = v;
  return 1;
}

/* Undef becomes NULL, which the library reports as KV_ERR_NULL_POINTER. */
static int kvperl_handle_elem(pTHX_ SV* e, const char* fn, const char* what, SSize_t i,
                              void* slot) {
  void* p = NULL;
  if (e != NULL && SvOK(e) && !kvperl_swig.unwrap_array(aTHX_ e, &p)) {
    KVPERL_SET_ERROR("%s: %s[%ld] is not an array handle ('%s')", fn, what, (long)i,
                     kvperl_show(aTHX_ e));
    return 0;
  }
  *(KVArrayHandle*)slot = (KVArrayHandle)p;
  return 1;
}

int kvperl_int_list(pTHX_ SV* in, const char* fn, const char* what, int** out, int* count) {
  void* table;
  if (!kvperl_table(aTHX_ in, fn, what, sizeof(int), kvperl_int_elem, &table, count)) return 0;
  *out = (int*)table;
  return 1;
}

int kvperl_handle_list(pTHX_ SV* in, const char* fn, const char* what, KVArrayHandle** out,
                       int* count) {
  void* table;
  if (!kvperl_table(aTHX_ in, fn, what, sizeof(KVArrayHandle), kvperl_handle_elem, &table,
                    count))
    return 0;
  *out = (KVArrayHandle*)table;
  return 1;
}

int kvperl_int64_list(pTHX_ SV* in, const char* fn, const char* what, int64_t** out,
                      int64_t* count) {
  void* table;
  int n = 0;
  if (!kvperl_table(aTHX_ in, fn, what, sizeof(int64_t), kvperl_dim_elem, &table, &n)) return 0;
  *out = (int64_t*)table;
  *count = n;
  return 1;
}

int kvperl_shape(pTHX_ SV* in, const char* fn, int64_t** out, int* ndim) {
  void* table;
  if (!kvperl_table(aTHX_ in, fn, "shape", sizeof(int64_t), kvperl_dim_elem, &table, ndim))
    return 0;
  *out = (int64_t*)table;
  return 1;
}

/* Array ref of strings -> one malloc'ed block holding the char* table followed by private
 * UTF-8 copies of the strings (the library never sees Perl's buffers, so a callback that
 * changes the caller's key list cannot pull a string away under a running call). */
int kvperl_str_list(pTHX_ SV* in, const char* fn, const char* what, char*** out, int* count) {
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

/* ---------------------------------------------------------------------------------------- */
/* Callbacks: registration record, trampolines, deferred release                             */
/* ---------------------------------------------------------------------------------------- */

struct kvperl_callback {
  SV* code;                     /* the CV, with one reference owned by this record */
  void* owner;                  /* PerlInterpreter* that registered it (NULL w/o MULTIPLICITY) */
  pthread_t thread;             /* the thread that registered it */
  struct kvperl_callback* next; /* link in the deferred-release list */
};

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
void kvperl_callback_release_now(kvperl_callback* cb) {
  dTHXa((PerlInterpreter*)cb->owner);
  SvREFCNT_dec(cb->code);
  free(cb);
}

/* KVFreeFn of every Perl registration. On the owner thread the reference is dropped at
 * once; a release on any other thread (which must not touch Perl) is queued and dropped by
 * kvperl_drain_releases() on the owner thread, which the Perl layer calls after
 * KVStoreFree and KVStoreSetUpdater. */
void kvperl_callback_free(void* user_data) {
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
 * the array. A row_sparse array (an updater's recv after row_sparse pushes) is blessed into
 * the row-sparse subclass. */
static SV* kvperl_view_new(pTHX_ KVArrayHandle h) {
  HV* hv = newHV();
  SV* ptr = newSV(0);
  kvperl_swig.wrap_array(aTHX_ ptr, (void*)h);
  (void)hv_stores(hv, "handle", ptr);
  (void)hv_stores(hv, "view", newSViv(1));
  int stype = KV_STYPE_DEFAULT;
  const char* cls = KVArrayGetStorageType(h, &stype) == 0 && stype == KV_STYPE_ROW_SPARSE
                        ? KVPERL_ROW_SPARSE_CLASS
                        : KVPERL_NDARRAY_CLASS;
  return sv_bless(newRV_noinc((SV*)hv), gv_stashpv(cls, GV_ADD));
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
int kvperl_updater(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data) {
  kvperl_callback* cb = (kvperl_callback*)user_data;
  if (cb == NULL || !kvperl_on_owner(cb)) return kvperl_refuse_foreign();
  dTHXa((PerlInterpreter*)cb->owner);
  return kvperl_invoke(aTHX_ cb, 1, key, NULL, recv, stored, 1);
}

/* KVStrUpdater trampoline: the sub gets ($key_string, $recv, $stored). */
int kvperl_str_updater(const char* key, KVArrayHandle recv, KVArrayHandle stored,
                              void* user_data) {
  kvperl_callback* cb = (kvperl_callback*)user_data;
  if (cb == NULL || !kvperl_on_owner(cb)) return kvperl_refuse_foreign();
  dTHXa((PerlInterpreter*)cb->owner);
  return kvperl_invoke(aTHX_ cb, 0, 0, key ? key : "", recv, stored, 1);
}

/* KVController trampoline: the sub gets ($head, $body). */
int kvperl_controller(int head, const char* body, void* user_data) {
  kvperl_callback* cb = (kvperl_callback*)user_data;
  if (cb == NULL || !kvperl_on_owner(cb)) return kvperl_refuse_foreign();
  dTHXa((PerlInterpreter*)cb->owner);
  return kvperl_invoke(aTHX_ cb, 1, head, body ? body : "", NULL, NULL, 0);
}

/* A registration for `in` (a code ref), or NULL for undef; sets $@ and returns 0 otherwise. */
int kvperl_callback_arg(pTHX_ SV* in, const char* fn, kvperl_callback** out) {
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

/* ---------------------------------------------------------------------------------------- */
/* Helpers wrapped for the Perl layer                                                        */
/* ---------------------------------------------------------------------------------------- */

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
