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

/* The typemaps below call the module's hand-written support code (kvstore_perl_support.c).
 * SWIG's runtime is private to this wrapper: the two adapters hand the support code what it
 * needs of it (unwrapping and making KVArrayHandle pointers), registered at boot. */
%{
#include "perl/kvstore_perl_support.h"

static int kvperl_swig_unwrap_array(pTHX_ SV* sv, void** out) {
  return SWIG_IsOK(SWIG_ConvertPtr(sv, out, SWIGTYPE_p_KVArray_, 0));
}
static void kvperl_swig_wrap_array(pTHX_ SV* sv, void* ptr) {
  SWIG_MakePtr(sv, ptr, SWIGTYPE_p_KVArray_, 0);
}
%}
%init %{
  kvperl_support_init(kvperl_swig_unwrap_array, kvperl_swig_wrap_array);
%}

/* ---------------------------------------------------------------------------------------- */
/* The hot data calls: one XS function for KVStore::Store's push and pull                    */
/* ---------------------------------------------------------------------------------------- */

/* kvperl_hot_call(op, store, key, values, priority), op 0 push / 1 pull: KVStorePush or
 * KVStorePull of an int key with one KVStore::NDArray, or of an array ref of int keys with an
 * array ref of as many, reading the keys and the NDArrays' handles straight from the Perl
 * values. The generated KVStorePush takes array refs of keys and of SWIG handles, which the Perl
 * layer had to build and check first (a join and a regex over the keys, a map over the
 * values), and mallocs a table for each. Returns the call's status, or undef without calling
 * the library when an argument is not of the accepted kinds; the Perl layer then takes its
 * other paths, which accept or refuse it as before. Accepted, as KVStore::Store's _hot_keys and
 * _hot_handles accept them: a key that is a plain integer (IV) within C int, or a string that
 * is a canonical integer of at most 9 digits; a value whose class is exactly KVStore::NDArray
 * and whose handle is defined; lists that are plain array refs, non-empty, of equal length.
 * When the status is not 0, $KVStore::Raw::HOT_FOREIGN is the foreign-callback count from
 * before the call (kvperl_foreign_callback_count), for the layer's error message. */
%{
#define KVPERL_HOT_STACK 256

/* A key _hot_keys would accept, as a C int; 0 otherwise. */
static int kvperl_hot_key(pTHX_ SV* sv, int* out) {
  if (sv == NULL || SvGMAGICAL(sv) || SvROK(sv)) return 0;
  if (SvPOK(sv)) {
    STRLEN len;
    const char* s = SvPV_nomg(sv, len);
    STRLEN i = (len > 0 && s[0] == '-') ? 1 : 0;
    if (len == i || len - i > 9) return 0;
    if (s[i] == '0') {
      if (len != 1) return 0; /* "0" only: "00", "-0", "03" are strings */
      *out = 0;
      return 1;
    }
    long v = 0;
    for (STRLEN j = i; j < len; ++j) {
      if (s[j] < '0' || s[j] > '9') return 0;
      v = v * 10 + (s[j] - '0');
    }
    *out = (int)(i ? -v : v);
    return 1;
  }
  if (!SvIOK(sv) || SvNOK(sv) || SvIsUV(sv)) return 0;
  IV v = SvIVX(sv);
  if (v < INT_MIN || v > INT_MAX) return 0;
  *out = (int)v;
  return 1;
}

/* The handle of a value _hot_handles would accept (ref eq 'KVStore::NDArray', handle
 * defined); 0 otherwise. */
static int kvperl_hot_array(pTHX_ SV* sv, KVArrayHandle* out) {
  if (sv == NULL || SvGMAGICAL(sv) || !sv_isobject(sv)) return 0;
  SV* obj = SvRV(sv);
  if (SvTYPE(obj) != SVt_PVHV || SvRMAGICAL(obj)) return 0;
  const char* cls = HvNAME(SvSTASH(obj));
  if (cls == NULL || strcmp(cls, "KVStore::NDArray") != 0) return 0;
  SV** h = hv_fetchs((HV*)obj, "handle", 0);
  if (h == NULL || !SvOK(*h)) return 0;
  void* p = NULL;
  if (!SWIG_IsOK(SWIG_ConvertPtr(*h, &p, SWIGTYPE_p_KVArray_, 0)) || p == NULL) return 0;
  *out = (KVArrayHandle)p;
  return 1;
}

/* A plain (unblessed, untied) array ref's AV, or NULL. */
static AV* kvperl_hot_list(pTHX_ SV* sv) {
  if (sv == NULL || SvGMAGICAL(sv) || !SvROK(sv)) return NULL;
  SV* av = SvRV(sv);
  if (SvTYPE(av) != SVt_PVAV || SvOBJECT(av) || SvRMAGICAL(av)) return NULL;
  return (AV*)av;
}

XS(kvperl_hot_call_xs) {
  dXSARGS;
  if (items != 5) croak("Usage: kvperl_hot_call(op, store, key, values, priority)");
  const int push = SvIV(ST(0)) == 0;
  void* store = NULL;
  int key1 = 0;
  KVArrayHandle val1 = NULL;
  int kbuf[KVPERL_HOT_STACK];
  KVArrayHandle vbuf[KVPERL_HOT_STACK];
  int* keys = &key1;
  KVArrayHandle* vals = &val1;
  SSize_t n = 1;
  int rc;
  if (!SWIG_IsOK(SWIG_ConvertPtr(ST(1), &store, SWIGTYPE_p_KVStore_, 0)) || store == NULL ||
      !SvIOK(ST(4)) || SvIsUV(ST(4)) || SvIVX(ST(4)) < INT_MIN || SvIVX(ST(4)) > INT_MAX)
    XSRETURN_UNDEF;
  if (!SvROK(ST(2))) {
    if (!kvperl_hot_key(aTHX_ ST(2), &key1) || !kvperl_hot_array(aTHX_ ST(3), &val1))
      XSRETURN_UNDEF;
  } else {
    AV* kav = kvperl_hot_list(aTHX_ ST(2));
    AV* vav = kvperl_hot_list(aTHX_ ST(3));
    if (kav == NULL || vav == NULL) XSRETURN_UNDEF;
    n = av_top_index(kav) + 1;
    if (n < 1 || n > INT_MAX || av_top_index(vav) + 1 != n) XSRETURN_UNDEF;
    if (n <= KVPERL_HOT_STACK) {
      keys = kbuf;
      vals = vbuf;
    } else {
      keys = (int*)malloc(sizeof(int) * (size_t)n);
      vals = (KVArrayHandle*)malloc(sizeof(KVArrayHandle) * (size_t)n);
      if (keys == NULL || vals == NULL) {
        free(keys);
        free(vals);
        XSRETURN_UNDEF;
      }
    }
    SV** ke = AvARRAY(kav);
    SV** ve = AvARRAY(vav);
    for (SSize_t i = 0; i < n; ++i) {
      if (!kvperl_hot_key(aTHX_ ke[i], &keys[i]) || !kvperl_hot_array(aTHX_ ve[i], &vals[i])) {
        if (keys != kbuf) {
          free(keys);
          free(vals);
        }
        XSRETURN_UNDEF;
      }
    }
  }
  const long foreign = kvperl_foreign_callback_count();
  rc = push ? KVStorePush((KVStoreHandle)store, (int)n, keys, vals, (int)SvIVX(ST(4)))
            : KVStorePull((KVStoreHandle)store, (int)n, keys, vals, (int)SvIVX(ST(4)));
  if (rc != 0) sv_setiv(get_sv("KVStore::Raw::HOT_FOREIGN", GV_ADD), (IV)foreign);
  if (keys != kbuf && keys != &key1) {
    free(keys);
    free(vals);
  }
  XSRETURN_IV(rc);
}
%}
%native(kvperl_hot_call) void kvperl_hot_call_xs();

/* ---------------------------------------------------------------------------------------- */
/* Out-parameters: not passed from Perl, returned after the status                           */
/* ---------------------------------------------------------------------------------------- */

/* An out-parameter is a local of the wrapper; its value (TO_SV, over *$1) is returned after
 * the status, or undef when the status is not 0. */
%define KVPERL_OUT(PATTERN, CTYPE, TO_SV)
%typemap(in, numinputs=0) PATTERN (CTYPE temp = 0) { $1 = ($1_ltype)&temp; }
%typemap(argout) PATTERN {
  if (argvi >= items) EXTEND(sp, argvi + 1);
  $result = (result == 0) ? TO_SV : &PL_sv_undef;
  argvi++;
}
%enddef

/* New handles: SWIG pointers (_p_KVArray_, _p_KVStore_), owned by the caller. */
KVPERL_OUT(KVArrayHandle* KVSWIG_NEW_HANDLE, KVArrayHandle,
           (*$1 != NULL ? SWIG_NewPointerObj(SWIG_as_voidptr(*$1), $*1_descriptor, 0)
                        : &PL_sv_undef))
KVPERL_OUT(KVStoreHandle* KVSWIG_NEW_HANDLE, KVStoreHandle,
           (*$1 != NULL ? SWIG_NewPointerObj(SWIG_as_voidptr(*$1), $*1_descriptor, 0)
                        : &PL_sv_undef))
KVPERL_OUT(int* KVSWIG_OUT_INT, int, sv_2mortal(newSViv(*$1)))
KVPERL_OUT(int64_t* KVSWIG_OUT_INT64, int64_t, sv_2mortal(newSViv((IV)*$1)))
KVPERL_OUT(size_t* KVSWIG_OUT_SIZE, size_t, sv_2mortal(newSVuv((UV)*$1)))
/* Library-owned string (valid while the store lives): copied into a Perl string. */
KVPERL_OUT(const char** KVSWIG_OUT_STRING, const char*,
           (*$1 != NULL ? sv_2mortal(newSVpv(*$1, 0)) : &PL_sv_undef))
/* The data address of a CPU array, as an integer (for zero-copy users such as PDL). */
KVPERL_OUT(void** out_data, void*, sv_2mortal(newSVuv(PTR2UV(*$1))))

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

/* Single C strings (store type, optimizer spec, command body): sent as UTF-8 (see
 * kvperl_c_string). The pointer is Perl's buffer, read during the call only. */
%typemap(in) const char* KVSWIG_IN_STRING {
  {
    const char* str = NULL;
    if (!kvperl_c_string(aTHX_ $input, "$symname", "$1_name", &str)) SWIG_fail;
    $1 = ($1_ltype)str;
  }
}

/* Shapes: [2, 3]. */
%typemap(in) (const int64_t* KVSWIG_SHAPE, int KVSWIG_NDIM) {
  if (!kvperl_shape(aTHX_ $input, "$symname", &$1, &$2)) SWIG_fail;
}
%typemap(freearg) (const int64_t* KVSWIG_SHAPE, int KVSWIG_NDIM) { free((void*)$1); }

/* List arguments of the shared list calls (../kvstore_lists.h); the shim checks that each
 * handle list is as long as its key list, and a mismatch croaks like any other bad argument. */
%define KVPERL_LIST(PARAMS, CTYPE, CONVERT)
%typemap(in) PARAMS {
  {
    CTYPE list = NULL;
    if (!CONVERT(aTHX_ $input, "$symname", "$2_name", &list, &$1)) SWIG_fail;
    $2 = ($2_ltype)list;
  }
}
%typemap(freearg) PARAMS { free((void*)$2); }
%enddef
KVPERL_LIST((int num, const int* keys), int*, kvperl_int_list)              /* [3, 5, 7] */
KVPERL_LIST((int num, const char* const* keys), char**, kvperl_str_list)    /* ['w', 'b'] */
KVPERL_LIST((int nvals, const KVArrayHandle* vals), KVArrayHandle*, kvperl_handle_list)

/* A binding error of the shims (kvswig_take_error) croaks with its message. */
%exception {
  $action
  {
    const char* kvswig_msg = kvswig_take_error();
    if (kvswig_msg != NULL) {
      KVPERL_SET_ERROR("%s", kvswig_msg);
      SWIG_fail;
    }
  }
}

/* Host data in: a packed byte string (pack 'f*', ...), read during the call only. */
%typemap(in) (const void* KVSWIG_DATA_IN, size_t KVSWIG_NBYTES) {
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

/* int64 lists (row ids): [4, 1, 7], copied for the call; [] passes a table of no entries. */
%typemap(in) (const int64_t* KVSWIG_INT64_LIST, int64_t KVSWIG_INT64_COUNT) {
  if (!kvperl_int64_list(aTHX_ $input, "$symname", "$1_name", &$1, &$2)) SWIG_fail;
}
%typemap(freearg) (const int64_t* KVSWIG_INT64_LIST, int64_t KVSWIG_INT64_COUNT) {
  free((void*)$1);
}

/* Row ids out: only the array is passed; the wrapper asks for the number of rows, the library
 * fills a table of that many, and an array ref of the ids is returned after the status. (A
 * dense array reaches the library with no table, which reports it.) */
%typemap(in) (KVArrayHandle array, int64_t* out_ids, int64_t capacity) (int64_t* ids = NULL) {
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
    int64_t n = 0;
    if ($1 != NULL && KVArrayGetNumRows($1, &n) == 0 && n > 0) {
      ids = (int64_t*)malloc(sizeof(int64_t) * (size_t)n);
      if (ids == NULL) {
        KVPERL_SET_ERROR("$symname: out of memory");
        SWIG_fail;
      }
      $2 = ids;
      $3 = n;
    }
  }
}
%typemap(argout) (KVArrayHandle array, int64_t* out_ids, int64_t capacity) {
  if (argvi >= items) EXTEND(sp, argvi + 1);
  if (result == 0) {
    AV* av = newAV();
    for (int64_t i = 0; i < $3; ++i) av_push(av, newSViv((IV)$2[i]));
    $result = sv_2mortal(newRV_noinc((SV*)av));
  } else {
    $result = &PL_sv_undef;
  }
  argvi++;
}
%typemap(freearg) (KVArrayHandle array, int64_t* out_ids, int64_t capacity) { free(ids$argnum); }

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

%include "perl/kvstore_perl_support.h"

/* ---------------------------------------------------------------------------------------- */
/* The shared catalogue applies the typemaps above to the parameters of the C API            */
/* ---------------------------------------------------------------------------------------- */

/* Status and value results both return the int as it is (the status first, see above). */
%typemap(ret) int KVSWIG_VALUE ""
%include "kvstore_typemaps.i"
