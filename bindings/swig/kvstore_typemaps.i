/* kvstore_typemaps.i - the typemap catalogue every SWIG language shares.
 *
 * Each parameter of the C API whose meaning is the same in every language is named here once,
 * under the canonical pattern of its meaning (the KVSWIG_* names below). A language file
 * (java/kvstore_java.i, perl/kvstore_perl.i) defines its typemaps for the canonical patterns,
 * then %includes this file, which %applies them to the real parameters. A new out-parameter
 * or string argument of kvstore.h is added here, and every language handles it. The list
 * arguments follow the same scheme (kvstore_lists.h names the shims' parameters).
 *
 * Meanings (the language's TYPEMAPS.md says how each one looks there):
 *
 *   int KVSWIG_VALUE          A function whose int result is a value, not a KV error code.
 *                             Every other int result is a status: 0, or a negative KVErrorCode
 *                             whose message is KVGetLastError() (or the binding's own, see
 *                             kvswig_take_error), which each language turns into its failure.
 *   KVArrayHandle* KVSWIG_NEW_HANDLE, KVStoreHandle* KVSWIG_NEW_HANDLE
 *                             A handle created by the call, owned by the caller (freed with
 *                             KVArrayFree / KVStoreFree); not passed in, returned on success.
 *   int* KVSWIG_OUT_INT, int64_t* KVSWIG_OUT_INT64, size_t* KVSWIG_OUT_SIZE
 *                             A scalar result; not passed in, returned on success.
 *   const char** KVSWIG_OUT_STRING
 *                             A string the library keeps; the language returns a copy.
 *   const char* KVSWIG_IN_STRING
 *                             A text argument, sent as UTF-8 for the call only.
 *   (const int64_t* KVSWIG_SHAPE, int KVSWIG_NDIM)
 *                             A shape: the language's list of dims, copied for the call.
 *   (const void* KVSWIG_DATA_IN, size_t KVSWIG_NBYTES)
 *                             Host bytes read by the call (the library checks the count).
 *   (const int64_t* KVSWIG_INT64_LIST, int64_t KVSWIG_INT64_COUNT)
 *                             A list of int64 values (row ids): the language's list of
 *                             integers, copied for the call; an empty list passes (NULL, 0).
 *   (int num, const int* keys), (int num, const char* const* keys),
 *   (int nvals, const KVArrayHandle* vals)
 *                             The list arguments of kvstore_lists.h; the twins below share them.
 *
 * The row ids of a row_sparse array (KVArrayGetRowIds: int64_t* out_ids, int64_t capacity) are
 * an output list whose length the language asks for first; each language file maps them.
 */

%apply int KVSWIG_VALUE { int KVGetVersion, int KVHasFeature, int KVIsWorkerNode,
                          int KVIsServerNode, int KVIsSchedulerNode };

%apply KVArrayHandle* KVSWIG_NEW_HANDLE { KVArrayHandle* out };
%apply KVStoreHandle* KVSWIG_NEW_HANDLE { KVStoreHandle* out };

%apply int* KVSWIG_OUT_INT { int* out_count, int* out_ndim, int* out_dtype, int* out_dev_type,
                             int* out_dev_id, int* out_rank, int* out_size, int* out_number,
                             int* out_capable, int* out_stype };
%apply int64_t* KVSWIG_OUT_INT64 { int64_t* out_size, int64_t* out_num_rows };
%apply size_t* KVSWIG_OUT_SIZE { size_t* out_nbytes };
%apply const char** KVSWIG_OUT_STRING { const char** out_type, const char** out_stats };

%apply const char* KVSWIG_IN_STRING { const char* type, const char* spec, const char* body,
                                      const char* path, const char* capability };

%apply (const int64_t* KVSWIG_SHAPE, int KVSWIG_NDIM) { (const int64_t* shape, int ndim) };
%apply (const void* KVSWIG_DATA_IN, size_t KVSWIG_NBYTES) { (const void* data, size_t nbytes) };
%apply (const int64_t* KVSWIG_INT64_LIST, int64_t KVSWIG_INT64_COUNT) {
  (const int64_t* row_ids, int64_t num_rows) };

%apply (int num, const int* keys) { (int vnum, const int* vkeys), (int onum, const int* okeys) };
%apply (int num, const char* const* keys) {
  (int vnum, const char* const* vkeys), (int onum, const char* const* okeys) };
%apply (int nvals, const KVArrayHandle* vals) { (int nouts, const KVArrayHandle* outs),
                                                (int nrow_ids, const KVArrayHandle* row_ids) };
