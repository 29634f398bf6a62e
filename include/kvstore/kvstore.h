/*
 * kvstore.h - the public C ABI of libkvstore.
 *
 * libkvstore is a parameter-synchronisation store for data-parallel training: a trainer
 * initialises named tensors, pushes gradients (several values for one key are summed), the
 * store merges the sum into the stored value through an updater (default: assign), and pull
 * copies the stored value into one or many output arrays.
 *
 * Conventions (they hold for every function below unless its comment says otherwise):
 *
 *  - Return value. Every fallible function returns int: 0 (KV_OK) on success or a negative
 *    KV_ERR_* code from kvstore_errors.h. On failure KVGetLastError() returns a message for
 *    the calling thread that names the key, shapes and dtypes involved. No C++ exception,
 *    abort() or exit() ever leaves the library.
 *  - Atomicity. A call that fails leaves every stored value and every output argument as it
 *    was (output arrays of a failed pull are not written; *out handles are not set).
 *  - Handles. KVStoreHandle and KVArrayHandle are pointers to distinct incomplete structs.
 *    Passing NULL where a handle is required returns KV_ERR_NULL_POINTER. Passing a handle
 *    that was already freed is undefined behaviour, as with free().
 *  - Freeing during a call. KVStoreFree and KVArrayFree of a handle that a call still running
 *    was given (on another thread, or the store's own updater or controller freeing its
 *    store, or the array being pushed) return KV_ERR_BUSY, free nothing and leave the handle
 *    usable; free it again once that call has returned. The library only sees calls that
 *    have entered it: a program that frees a handle on one thread while another thread may
 *    be about to pass it to a call must order the two itself (every binding does).
 *  - Ownership. Objects created by a *Create function are owned by the caller and released by
 *    the matching *Free function, which accepts NULL. Strings returned through `const char**`
 *    are owned by the library and stay valid as stated per function.
 *  - Threads. Every function may be called from any thread. Store functions may be called on
 *    one store from many threads at once: operations on one key are serialised in call order
 *    per thread, operations on different keys may proceed in parallel (an in-process store
 *    locks keys in groups, so two calls on different keys can also wait for each other). Array functions on one
 *    array are not synchronised with each other: do not write an array from one thread while
 *    another thread reads or writes it. In-process stores never hold on to caller arrays.
 *  - Asynchronous arrays (distributed stores). A pull writes its outputs after the call
 *    returned: every function that reads or writes such an output waits for it first. A push
 *    of a single CPU value of 64 KiB or more sends the caller's bytes without copying them,
 *    reading the array after the call returned: until that push is answered, functions that
 *    write the array wait for it, and KVArrayFree hands the memory over to the push instead
 *    of waiting. Memory written through a KVArrayGetData pointer is not tracked: call
 *    KVArrayGetData (or KVStoreWaitAll) again before writing through it after such a push.
 *  - Keys. A store uses int keys (functions without suffix) or string keys (the *Str twins),
 *    fixed by the first call that names a key; using the other kind afterwards returns
 *    KV_ERR_KEY_KIND_MISMATCH naming the key.
 *  - Lists. Data calls take parallel arrays `keys[i]`, `vals[i]` of length `num`. A key that
 *    appears several times in one push has its values summed; in one pull, each listed output
 *    receives a copy of the stored value.
 */
#ifndef KVSTORE_KVSTORE_H_
#define KVSTORE_KVSTORE_H_

#include <stddef.h>
#include <stdint.h>

#include "kvstore_errors.h"

#if defined(SWIG)
#define KVSTORE_API /* binding generators see plain declarations */
#elif defined(_WIN32)
#if defined(KVSTORE_BUILDING_LIBRARY)
#define KVSTORE_API __declspec(dllexport)
#else
#define KVSTORE_API __declspec(dllimport)
#endif
#else
#define KVSTORE_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------- */
/* Version, features, errors                                                                 */
/* ---------------------------------------------------------------------------------------- */

#define KVSTORE_VERSION_MAJOR 0
#define KVSTORE_VERSION_MINOR 1
#define KVSTORE_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH */
#define KVSTORE_VERSION_NUMBER \
  (KVSTORE_VERSION_MAJOR * 10000 + KVSTORE_VERSION_MINOR * 100 + KVSTORE_VERSION_PATCH)

/* The version of the loaded library, as KVSTORE_VERSION_NUMBER. Never fails. */
KVSTORE_API int KVGetVersion(void);

/* The version of the loaded library as "MAJOR.MINOR.PATCH"; static storage. Never fails. */
KVSTORE_API const char* KVGetVersionString(void);

/* Optional features for KVHasFeature. */
typedef enum KVFeature {
  KV_FEATURE_CUDA = 1, /* built with CUDA kernels (a GPU may still be absent at run time) */
  KV_FEATURE_NCCL = 2, /* built with the nccl store (libnccl is opened on first use) */
  KV_FEATURE_DIST = 3  /* built with the distributed (parameter-server) stores */
} KVFeature;

/* 1 if the library was built with `feature`, 0 if not or if `feature` is unknown. */
KVSTORE_API int KVHasFeature(int feature);

/* The number of usable GPUs at run time: 0 in a build without CUDA or when no driver or
 * device is present (that is not an error). Returns 0 or KV_ERR_NULL_POINTER. */
KVSTORE_API int KVGetGpuCount(int* out_count);

/* The message of the most recent failed call on the calling thread, or "" if none has failed.
 * The string stays valid until the next failing call on this thread. Never fails. */
KVSTORE_API const char* KVGetLastError(void);

/* The symbolic name of an error code ("KV_ERR_SHAPE_MISMATCH", "KV_OK"), or "KV_ERR_UNKNOWN"
 * for a value not in the table; static storage. Never fails. */
KVSTORE_API const char* KVErrorName(int code);

/* ---------------------------------------------------------------------------------------- */
/* Arrays                                                                                    */
/* ---------------------------------------------------------------------------------------- */

/* An n-dimensional array of one dtype on one device: dense, or row_sparse (see "Row-sparse
 * arrays" below for how the functions of this section treat those). */
typedef struct KVArray_ KVArray;
typedef KVArray* KVArrayHandle;

/* Element types. The values match the reference implementation's type flags. */
typedef enum KVDType {
  KV_FLOAT32 = 0,
  KV_FLOAT64 = 1,
  KV_FLOAT16 = 2, /* IEEE 754 binary16, stored as uint16_t bit patterns */
  KV_UINT8 = 3,
  KV_INT32 = 4,
  KV_INT64 = 6
} KVDType;

/* Device types of a context (dev_type, dev_id). */
typedef enum KVDeviceType {
  KV_CPU = 1, /* any dev_id >= 0; all CPU contexts share host memory */
  KV_GPU = 2  /* dev_id in [0, KVGetGpuCount()); KV_ERR_DEVICE otherwise */
} KVDeviceType;

/* The largest rank an array may have. */
#define KV_MAX_NDIM 32

/* Element-wise operators for KVArrayBinary / KVArrayBinaryScalar. */
typedef enum KVBinaryOp {
  KV_OP_ADD = 0, /* a + b */
  KV_OP_SUB = 1, /* a - b */
  KV_OP_MUL = 2, /* a * b */
  KV_OP_DIV = 3  /* a / b; integer dtypes truncate and reject a zero divisor */
} KVBinaryOp;

/* Creates a zero-filled array of `ndim` dims (0 <= ndim <= KV_MAX_NDIM; ndim 0 is a scalar
 * with one element) with `shape[i] >= 0`. `shape` may be NULL when ndim is 0.
 * Errors: NULL_POINTER (out, or shape with ndim > 0), INVALID_ARGUMENT (ndim, negative dim,
 * unknown dtype, element count overflow), DEVICE (unknown dev_type, negative dev_id, GPU
 * unavailable), OUT_OF_MEMORY. On success the caller owns *out. */
KVSTORE_API int KVArrayCreate(const int64_t* shape, int ndim, int dtype, int dev_type,
                              int dev_id, KVArrayHandle* out);

/* Releases an array. NULL is accepted. A pending pull into the array is waited for (its
 * error dropped); a distributed push still reading it keeps the memory alive until it is
 * sent, without making this call wait. Errors: BUSY (a call that was given the array is
 * still running; nothing is freed), INVALID_ARGUMENT (the array is lent by the store, e.g.
 * an updater's `recv` or `stored`, or is already being freed). */
KVSTORE_API int KVArrayFree(KVArrayHandle array);

/* Number of dimensions. Errors: NULL_POINTER. */
KVSTORE_API int KVArrayGetNDim(KVArrayHandle array, int* out_ndim);

/* Copies the dims into `out_dims`, which holds `capacity` entries; *out_ndim receives the rank
 * (also when capacity is too small, in which case INVALID_ARGUMENT is returned and nothing is
 * copied). Errors: NULL_POINTER, INVALID_ARGUMENT. */
KVSTORE_API int KVArrayGetShape(KVArrayHandle array, int64_t* out_dims, int capacity,
                                int* out_ndim);

/* Total number of elements (product of dims; 1 for rank 0). Errors: NULL_POINTER. */
KVSTORE_API int KVArrayGetSize(KVArrayHandle array, int64_t* out_size);

/* Size of the data in bytes. Errors: NULL_POINTER. */
KVSTORE_API int KVArrayGetNBytes(KVArrayHandle array, size_t* out_nbytes);

/* Element type (a KVDType). Errors: NULL_POINTER. */
KVSTORE_API int KVArrayGetDType(KVArrayHandle array, int* out_dtype);

/* Device context. Errors: NULL_POINTER. */
KVSTORE_API int KVArrayGetContext(KVArrayHandle array, int* out_dev_type, int* out_dev_id);

/* Size in bytes of one element of `dtype`, or 0 for an unknown dtype. Never fails. */
KVSTORE_API size_t KVDTypeSize(int dtype);

/* The name of `dtype` as the reference spells it ("float32", "float16", "uint8", ...), or
 * NULL for a value not in KVDType; static storage. Bindings derive their dtype tables from
 * it by asking every value in [0, 16). Never fails. */
KVSTORE_API const char* KVDTypeName(int dtype);

/* Address of the element data of a CPU array, for zero-copy access from bindings (numpy,
 * NIO buffers). The pointer stays valid until the array is freed; the caller must respect
 * the threading rule above. Waits for pending asynchronous writes (see
 * KVArrayWaitToRead) and for distributed pushes still reading the array, so the memory may
 * be written once it returns. The pointer never changes afterwards (a later pull copies
 * into it rather than handing the array a received buffer). Errors: NULL_POINTER, DEVICE
 * (the array is not on the CPU). */
KVSTORE_API int KVArrayGetData(KVArrayHandle array, void** out_data);

/* Copies exactly `nbytes` bytes of host memory into the array. `nbytes` must equal the
 * array's byte size. Errors: NULL_POINTER, INVALID_ARGUMENT (byte count), CUDA. */
KVSTORE_API int KVArrayCopyFromHost(KVArrayHandle array, const void* data, size_t nbytes);

/* Copies the array into `nbytes` bytes of host memory; `nbytes` must equal the array's
 * byte size. Errors: NULL_POINTER, INVALID_ARGUMENT (byte count), CUDA. */
KVSTORE_API int KVArrayCopyToHost(KVArrayHandle array, void* data, size_t nbytes);

/* Copies `src` into `dst` (any devices). Shapes and dtypes must be equal.
 * Errors: NULL_POINTER, SHAPE_MISMATCH, DTYPE_MISMATCH, NOT_SUPPORTED (a row_sparse array),
 * CUDA. */
KVSTORE_API int KVArrayCopy(KVArrayHandle dst, KVArrayHandle src);

/* Sets every element to `value` converted to the array's dtype (integer dtypes truncate
 * toward zero; out-of-range values are an INVALID_ARGUMENT). Errors: NULL_POINTER,
 * INVALID_ARGUMENT, NOT_SUPPORTED (a row_sparse array), CUDA. */
KVSTORE_API int KVArrayFill(KVArrayHandle array, double value);

/* out = a <op> b, element-wise. a, b and out must share shape, dtype and device; `out` may
 * be `a` or `b` (in-place). Errors: NULL_POINTER, INVALID_ARGUMENT (op, integer division by
 * zero: `out` is then unchanged), SHAPE_MISMATCH, DTYPE_MISMATCH, DEVICE, NOT_SUPPORTED (a
 * row_sparse array), CUDA. */
KVSTORE_API int KVArrayBinary(int op, KVArrayHandle a, KVArrayHandle b, KVArrayHandle out);

/* out = a <op> scalar, element-wise, with the scalar converted to the dtype of `a`. `out`
 * may be `a`. Errors as KVArrayBinary. */
KVSTORE_API int KVArrayBinaryScalar(int op, KVArrayHandle a, double scalar, KVArrayHandle out);

/* Blocks until every pending asynchronous write into the array (a pull of a distributed
 * store) has finished; returns the error of a failed one (its code and message).
 * Arrays of in-process stores are never pending. Errors: NULL_POINTER, plus any code a
 * failed asynchronous pull produced (TIMEOUT, NETWORK, PEER_DEAD, ...). */
KVSTORE_API int KVArrayWaitToRead(KVArrayHandle array);

/* ---- Row-sparse arrays ------------------------------------------------------------------ */
/* A row_sparse array of logical shape (R, d1, ..., dk) stores only some rows: their ids
 * r_0 < ... < r_{n-1} in [0, R) (int64, strictly increasing) and a data block of shape
 * (n, d1, ..., dk) holding those rows in order; every other row reads as zero. It lives in
 * host memory (KV_CPU contexts only) and has rank >= 1. The array functions above see it
 * as follows: KVArrayGetNDim and KVArrayGetShape give the logical shape, KVArrayGetSize the
 * logical element count (R * d1 * ... * dk); KVArrayGetNBytes gives the bytes of the data
 * block, KVArrayGetData its address (valid until the row set is replaced, which only
 * KVStoreRowSparsePull does; ask again afterwards), and KVArrayCopyFromHost /
 * KVArrayCopyToHost copy the whole block (n * d1 * ... * dk elements). KVArrayCopy,
 * KVArrayFill, KVArrayBinary and KVArrayBinaryScalar refuse it with NOT_SUPPORTED (cast it
 * with KVArrayCastStorage). The stores take row_sparse values as documented at KVStoreInit,
 * KVStorePush and KVStoreRowSparsePull. */

/* Storage types (the reference's values). */
typedef enum KVStorageType {
  KV_STYPE_DEFAULT = 0,   /* dense: every element stored */
  KV_STYPE_ROW_SPARSE = 1 /* row ids + a block of those rows */
} KVStorageType;

/* Creates a row_sparse array of logical shape `shape` (ndim >= 1, as KVArrayCreate) holding
 * the `num_rows` rows `row_ids` with zero data; fill the block with KVArrayCopyFromHost (row
 * i of the block is row row_ids[i]). `row_ids` must be strictly increasing and each in
 * [0, shape[0]) (ids are not sorted for the caller: the block's row order is the caller's);
 * it may be NULL when num_rows is 0.
 * Errors: NULL_POINTER (out, shape, row_ids with num_rows > 0), INVALID_ARGUMENT (as
 * KVArrayCreate, ndim 0, num_rows < 0 or > shape[0], an id out of range or out of order; the
 * message names its position), NOT_SUPPORTED (dev_type other than KV_CPU), DEVICE,
 * OUT_OF_MEMORY. On success the caller owns *out. */
KVSTORE_API int KVArrayCreateRowSparse(const int64_t* shape, int ndim, int dtype, int dev_type,
                                       int dev_id, const int64_t* row_ids, int64_t num_rows,
                                       KVArrayHandle* out);

/* The storage type (a KVStorageType). Errors: NULL_POINTER. */
KVSTORE_API int KVArrayGetStorageType(KVArrayHandle array, int* out_stype);

/* The number of stored rows of a row_sparse array.
 * Errors: NULL_POINTER, INVALID_ARGUMENT (a dense array). */
KVSTORE_API int KVArrayGetNumRows(KVArrayHandle array, int64_t* out_num_rows);

/* Copies the row ids of a row_sparse array (increasing) into `out_ids`, which holds
 * `capacity` entries (NULL allowed when the array has no rows).
 * Errors: NULL_POINTER, INVALID_ARGUMENT (a dense array, capacity smaller than the number
 * of rows: nothing is copied). */
KVSTORE_API int KVArrayGetRowIds(KVArrayHandle array, int64_t* out_ids, int64_t capacity);

/* Creates a new array of storage type `stype` with the logical content of `src` (same
 * shape, dtype and device): dense to row_sparse keeps exactly the rows that have a non-zero
 * element (the reference's cast_storage; NaN counts as non-zero, -0 as zero), row_sparse to
 * dense fills the rows not stored with zeros, and a cast to src's own type copies it.
 * Errors: NULL_POINTER, INVALID_ARGUMENT (unknown stype, a dense scalar to row_sparse),
 * NOT_SUPPORTED (dense on a GPU to row_sparse), OUT_OF_MEMORY. On success the caller owns
 * *out. */
KVSTORE_API int KVArrayCastStorage(KVArrayHandle src, int stype, KVArrayHandle* out);

/* ---------------------------------------------------------------------------------------- */
/* Stores                                                                                    */
/* ---------------------------------------------------------------------------------------- */

typedef struct KVStore_ KVStore;
typedef KVStore* KVStoreHandle;

/* Updater: merges the summed pushed value `recv` into `stored`, in place, for an int key
 * (or, when no string updater is set, for the internal int id of a string key).
 * `recv` and `stored` are borrowed for the duration of the call: do not keep them; freeing
 * them returns INVALID_ARGUMENT. Use the KVArray* functions to read and write them. Return 0 on success; any other
 * value fails the push with KV_ERR_CALLBACK and the stored value stays as it was before the
 * push. The updater runs on the thread that called push/pushpull for in-process stores, and
 * on the thread that called KVStoreRunServer on a parameter server. It may run concurrently
 * for different keys when several threads push. It must not call data functions of the
 * same store (they return INVALID_ARGUMENT when it does, also from inside the updater of
 * another store that it pushed to), nor wait for another thread's call on the same store
 * (that call may wait for the keys the updater's push holds); two stores whose updaters push
 * into each other from different threads can therefore deadlock. */
typedef int (*KVUpdater)(int key, KVArrayHandle recv, KVArrayHandle stored, void* user_data);

/* String-key twin of KVUpdater; `key` is borrowed for the call. */
typedef int (*KVStrUpdater)(const char* key, KVArrayHandle recv, KVArrayHandle stored,
                            void* user_data);

/* Releases `user_data` of a callback registration; called exactly once, when the
 * registration is replaced or cleared or the store is freed (possibly on another thread,
 * after the last running call of the callback has returned). */
typedef void (*KVFreeFn)(void* user_data);

/* Server controller: receives commands sent by KVStoreSendCommandToServers on the thread
 * that called KVStoreRunServer. `body` is borrowed. Non-zero fails the command on the
 * sending worker with KV_ERR_CALLBACK. */
typedef int (*KVController)(int head, const char* body, void* user_data);

/* Creates a store. `type` (case-insensitive) is one of:
 *   local, local_update_cpu, local_allreduce_cpu  - one process, sums on the CPU
 *   device, local_allreduce_device                - one process, sums where the values live
 *   nccl                                          - one process, NCCL over the GPUs
 *   dist_sync, dist_device_sync, dist_sync_device, dist_async, dist_device_async,
 *   dist_async_device, dist                        - parameter servers (KV_FEATURE_DIST)
 * Errors: NULL_POINTER, INVALID_ARGUMENT (unknown type; the message lists the valid ones),
 * NOT_SUPPORTED (a type this build lacks), plus the errors of joining a distributed job.
 * On success the caller owns *out. */
KVSTORE_API int KVStoreCreate(const char* type, KVStoreHandle* out);

/* Releases a store, its stored values and its callback registrations (their free hooks run).
 * NULL is accepted. While another call on the store is running (another thread's, or the
 * push or KVStoreRunServer whose updater or controller makes this call) it returns
 * KV_ERR_BUSY and frees nothing. For a distributed worker it first waits for pending
 * operations and, unless disabled, runs the exit barrier. Returns 0, BUSY, or the error of
 * that final barrier (the store is released anyway). */
KVSTORE_API int KVStoreFree(KVStoreHandle store);

/* The type name given to KVStoreCreate, lowercased; owned by the store, valid until it is
 * freed. Errors: NULL_POINTER. */
KVSTORE_API int KVStoreGetType(KVStoreHandle store, const char** out_type);

/* Initialises keys with copies of `vals`. Keys in one call must be distinct and not yet
 * initialised. The updater never runs at init. A row_sparse value (local, device and dist_*
 * stores) is stored dense: the rows it lacks are zero.
 * Errors: NULL_POINTER, INVALID_ARGUMENT (num < 0, key repeated in the call, the string key
 * "" on a distributed store), DUPLICATE_KEY, KEY_KIND_MISMATCH, OUT_OF_MEMORY, and
 * distributed errors. */
KVSTORE_API int KVStoreInit(KVStoreHandle store, int num, const int* keys,
                            const KVArrayHandle* vals);
KVSTORE_API int KVStoreInitStr(KVStoreHandle store, int num, const char* const* keys,
                               const KVArrayHandle* vals);

/* Pushes values: for each distinct key, the values listed for it are summed and the sum is
 * merged by the updater (or assigned when none is set). `priority` is accepted for
 * compatibility; in-process stores complete the push before returning. Every value must have
 * the stored shape and dtype.
 * Row_sparse values (local and device stores with the key's stored value in host memory,
 * and dist_* stores): the values of a key are summed by the union of their rows. Without an
 * updater the stored value becomes that sum cast to dense (rows not pushed become zero, as
 * the reference's assign). A callback updater receives the sum as a row_sparse `recv`; a
 * built-in optimizer receives it dense, or with lazy_update (sgd, adam) updates only the
 * pushed rows, at a cost that scales with those rows. A key whose values in one call mix
 * dense and row_sparse ones is summed dense (as if each row_sparse value were cast to
 * dense). dist_* stores send only the summed rows (never compressed) and sum the workers'
 * pushes of a sync round by the union of rows in rank order (docs/DISTRIBUTED.md); they
 * refuse row_sparse values in KVStorePushPull with NOT_SUPPORTED. Other stores refuse
 * row_sparse values with NOT_SUPPORTED naming their type.
 * Errors: NULL_POINTER, INVALID_ARGUMENT, UNKNOWN_KEY, KEY_KIND_MISMATCH, SHAPE_MISMATCH,
 * DTYPE_MISMATCH, CALLBACK, DEVICE, CUDA, and distributed errors. */
KVSTORE_API int KVStorePush(KVStoreHandle store, int num, const int* keys,
                            const KVArrayHandle* vals, int priority);
KVSTORE_API int KVStorePushStr(KVStoreHandle store, int num, const char* const* keys,
                               const KVArrayHandle* vals, int priority);

/* Copies the stored value of keys[i] into outs[i] for every i (outputs may be on any
 * devices). Errors: as KVStorePush except CALLBACK. */
KVSTORE_API int KVStorePull(KVStoreHandle store, int num, const int* keys,
                            const KVArrayHandle* outs, int priority);
KVSTORE_API int KVStorePullStr(KVStoreHandle store, int num, const char* const* keys,
                               const KVArrayHandle* outs, int priority);

/* Pulls rows: for every i, the row_sparse output outs[i] receives exactly the rows of
 * keys[i]'s stored value named by row_ids[i]; its row set and data block are REPLACED (the
 * ids unique and increasing, the block those rows; an earlier KVArrayGetData pointer of
 * the output is stale afterwards). row_ids[i] is a dense array of any shape and dtype
 * whose values are integral row numbers in [0, rows of the key), in any order, repeats
 * allowed (a float value like 2.0 counts; 2.5 does not). A key may be listed several
 * times, each with its own output and row_ids; for one row_ids and many outputs, list the
 * same row_ids handle for each. outs[i] must have the key's logical shape and dtype. The
 * cost is the rows named, not the size of the value. Local, device and dist_* stores. On
 * dist_* stores only the requested rows cross the network, in both directions, and the call
 * returns once they arrived (unlike KVStorePull, it does not complete asynchronously); it
 * is ordered after the caller's earlier pushes of the key.
 * Errors: NULL_POINTER, INVALID_ARGUMENT (num < 0, a dense output, a row_sparse row_ids,
 * a non-integral or out-of-range row id: the message names the element), UNKNOWN_KEY,
 * KEY_KIND_MISMATCH, SHAPE_MISMATCH, DTYPE_MISMATCH, NOT_SUPPORTED (the nccl store, naming
 * the type; a key whose stored value is on a GPU; on dist_* stores a key whose rows have
 * more than 2^31 - 1 elements), and distributed errors. On error no output changes. */
KVSTORE_API int KVStoreRowSparsePull(KVStoreHandle store, int num, const int* keys,
                                     const KVArrayHandle* outs, const KVArrayHandle* row_ids,
                                     int priority);
KVSTORE_API int KVStoreRowSparsePullStr(KVStoreHandle store, int num, const char* const* keys,
                                        const KVArrayHandle* outs,
                                        const KVArrayHandle* row_ids, int priority);

/* Push of (vkeys, vals) followed by pull of (okeys, outs) as one call; the set of output
 * keys must equal the set of pushed keys. `outs[i]` may be the same handle as a value.
 * Errors: as KVStorePush. */
KVSTORE_API int KVStorePushPull(KVStoreHandle store, int vnum, const int* vkeys,
                                const KVArrayHandle* vals, int onum, const int* okeys,
                                const KVArrayHandle* outs, int priority);
KVSTORE_API int KVStorePushPullStr(KVStoreHandle store, int vnum, const char* const* vkeys,
                                   const KVArrayHandle* vals, int onum,
                                   const char* const* okeys, const KVArrayHandle* outs,
                                   int priority);

/* Init of (vkeys, vals) followed by pull of (okeys, outs). Broadcasting a key that is
 * already initialised fails with DUPLICATE_KEY. Errors: as KVStoreInit and KVStorePull. */
KVSTORE_API int KVStoreBroadcast(KVStoreHandle store, int vnum, const int* vkeys,
                                 const KVArrayHandle* vals, int onum, const int* okeys,
                                 const KVArrayHandle* outs, int priority);
KVSTORE_API int KVStoreBroadcastStr(KVStoreHandle store, int vnum, const char* const* vkeys,
                                    const KVArrayHandle* vals, int onum,
                                    const char* const* okeys, const KVArrayHandle* outs,
                                    int priority);

/* Registers the int-key updater; `updater` NULL restores the default (assign). A previous
 * registration is released through its free hook once no push is still running it. On
 * success the store owns `user_data` (free_fn, which may be NULL, runs exactly once); on
 * failure free_fn is never called and the caller keeps `user_data`, whatever the store type
 * and role. Errors: NULL_POINTER (store), NOT_SUPPORTED (a distributed worker: updates run
 * on the servers; use KVStoreSetOptimizer or a server program's updater). */
KVSTORE_API int KVStoreSetUpdater(KVStoreHandle store, KVUpdater updater, void* user_data,
                                  KVFreeFn free_fn);

/* Registers the string-key updater, used for string keys in preference to the int updater.
 * Ownership and errors as KVStoreSetUpdater. */
KVSTORE_API int KVStoreSetStrUpdater(KVStoreHandle store, KVStrUpdater updater,
                                     void* user_data, KVFreeFn free_fn);

/* Installs a built-in optimizer as the updater, from a spec such as
 * "sgd(learning_rate=0.1,momentum=0.9,wd=1e-4,rescale_grad=0.5,clip_gradient=5)".
 * Known names: sgd, nag, adam, adagrad, rmsprop, test. A distributed worker ships the spec
 * to the servers. Errors: NULL_POINTER, INVALID_ARGUMENT (unknown name or parameter),
 * NOT_SUPPORTED (a build without optimizers), and distributed errors. */
KVSTORE_API int KVStoreSetOptimizer(KVStoreHandle store, const char* spec);

/* Writes the state of the store's built-in optimizer (every key's state arrays and update
 * count, and the optimizer's spec) to the file `path`, in the versioned format of
 * docs/OPTIMIZER-STATES.md. The file is written atomically: a temporary file beside it is
 * synced and renamed over `path`, so `path` holds either the old content or the whole new
 * one. Keys never updated have no state and are not in the file. Pushes on other threads
 * wait while the state is copied. Errors: NULL_POINTER; NOT_SUPPORTED when the store has no
 * built-in optimizer (set by KVStoreSetOptimizer; a callback updater's state is the
 * caller's); INVALID_ARGUMENT when the file cannot be written (the message names the path
 * and the system's reason). A distributed worker first
 * waits for its own pending operations (as KVStoreWaitAll, reporting their failures), then
 * gathers every server's state; other workers' pushes of an unfinished sync round are not
 * in the file (save after a barrier); its errors include the distributed ones and
 * UNKNOWN_KEY when a server holds state of a key this worker never initialised. */
KVSTORE_API int KVStoreSaveOptimizerStates(KVStoreHandle store, const char* path);

/* Replaces the state of the store's built-in optimizer with the state saved in `path` by
 * KVStoreSaveOptimizerStates: afterwards the store's optimizer continues exactly as the
 * saved one would have (bit for bit), and keys absent from the file start afresh. The
 * optimizer must be the one the file was saved from (sgd, adam, ...); hyper-parameters such
 * as learning_rate may differ (a schedule changes them). Everything is checked before
 * anything changes; on error no state changes. Pushes on other threads wait while the state
 * is replaced. Errors: NULL_POINTER; NOT_SUPPORTED as for KVStoreSaveOptimizerStates;
 * INVALID_ARGUMENT for a file that cannot be read, is not a states file, has another format
 * version, is truncated or corrupt (checksums), or was saved from another optimizer or with
 * another number of state arrays per key; UNKNOWN_KEY for a key in the file that is not
 * initialised in the store; KEY_KIND_MISMATCH for int keys in a string-key store or the
 * reverse; DTYPE_MISMATCH and SHAPE_MISMATCH when a key's stored value differs from the
 * weight the state was saved for. On a distributed worker every server checks its part
 * first, and only when all accepted does any server replace its state. */
KVSTORE_API int KVStoreLoadOptimizerStates(KVStoreHandle store, const char* path);

/* Turns gradient compression of later pushes on, or off again, with the reference's
 * set_gradient_compression parameters: num_params key/value strings keys[i] = vals[i].
 *   "type"      (required) "2bit", "1bit", or "none" (compression off).
 *   "threshold" a decimal float32 (default 0.5); 2bit needs threshold > 0, 1bit takes any
 *               finite value.
 *   "pull"      "0" (default) or "1" (or a number equal to one, "1.0"): dist_* stores also
 *               compress dense pulls (2bit only, see below).
 * A key given twice keeps its last value; an unknown key is INVALID_ARGUMENT (the reference
 * ignores it). The quantisation is the reference's, bit for bit (docs/DISTRIBUTED.md,
 * "Gradient compression"): with error feedback, each pushed value is added to a float32
 * residual; 2bit sends +t, -t or 0 per element (16 elements per 4 bytes), 1bit +1 or -1
 * whatever t is (32 per 4 bytes), and what was not sent stays in the residual for the next
 * push.
 *  - What is compressed: pushes and pushpulls of float32 and float16 values (the reference
 *    compresses float32 only); values of other dtypes are pushed uncompressed. Init is never
 *    compressed, pulls only with "pull" = "1".
 *  - "pull" = "1" (dist_* stores; beyond the reference): a pull of a float32 or float16 key
 *    receives, per server part, the 2bit quantisation of the CHANGE since what this worker
 *    was last sent: the server and the worker each keep a float32 view of the part (per
 *    worker on the server), both add the dequantised reply (+t, -t or 0 per element) to it,
 *    and the pull returns the view rounded to the key's dtype. A view behind the value moves
 *    by at most t per element and pull; what was not sent goes out with the next pulls. The
 *    first pull of a part under a setting, and the next one after a failed pull, return the
 *    exact value and reset both views. Pushpull outputs and KVStoreRowSparsePull are exact.
 *    The worker's views are freed when the setting changes or is turned off, a server's
 *    views of a part for a worker at that worker's next pull of it without "pull" = "1".
 *    device stores accept the parameter and ignore it (their pulls do not cross a network).
 *    "pull" = "1" with 1bit is INVALID_ARGUMENT (+-1 per element and pull would never
 *    settle).
 *  - device and local_allreduce_device stores: every value of a push (even a single one) is
 *    quantised with its own residual, one per key and position of the value among that key's
 *    values in the call (per device when each device's value comes in a fixed order), and
 *    the dequantised values are summed in float32 and rounded once to the key's dtype (kept
 *    in float32 for a multi-precision optimizer).
 *  - dist_* stores: a worker sums its values of a key as without compression, quantises the
 *    sum with a residual per key (per server part for a key split over servers) and sends
 *    1/16 (2bit) or 1/32 (1bit) of the bytes; each message names its type and threshold, so
 *    the servers need no setting of their own. The servers dequantise the workers' pushes
 *    and sum them in float32 in rank order, rounded once to the key's dtype (or kept in
 *    float32 for a multi-precision optimizer). Each worker sets its own compression; the
 *    workers of a job should set the same.
 * Changing the setting, or turning it off, drops every residual: quantisation error not yet
 * sent is lost. Allowed at any time; pushes already started finish with the setting they
 * started with. Errors: NULL_POINTER (store; keys, vals or one of their strings when
 * num_params > 0); INVALID_ARGUMENT (num_params < 0, a missing or unknown type, a threshold
 * that is not a finite float32 or is <= 0 for 2bit, a "pull" other than "0" or "1", "pull" =
 * "1" with 1bit, an unknown key); NOT_SUPPORTED for the
 * local, local_update_cpu, local_allreduce_cpu and nccl stores and a server or scheduler
 * process's handle (the reference silently ignores the setting on local stores). On error
 * the setting is unchanged. */
KVSTORE_API int KVStoreSetGradientCompression(KVStoreHandle store, int num_params,
                                              const char* const* keys,
                                              const char* const* vals);

/* Capability names for KVStoreIsCapable (the reference's KVStoreBase.OPTIMIZER). */
#define KV_CAPABILITY_OPTIMIZER "optimizer"

/* Whether the store has `capability`, a name (case-insensitive, as store types are):
 * *out_capable receives 1 or 0.
 * Known names:
 *   "optimizer" - KVStoreSetOptimizer installs a built-in optimizer that runs where the
 *                 stored values live: in the calling process for local, device and nccl
 *                 stores, on the servers for the dist_* stores (a worker ships the spec), in
 *                 the server program for a server process's store. 1 for every store type.
 * The answer belongs to the store: it does not change while the store lives, and the call
 * neither waits for pending operations nor talks to other processes.
 * Errors: NULL_POINTER (store, capability, out_capable), INVALID_ARGUMENT (a name not
 * listed above; the message lists the known ones). On error *out_capable is unchanged. */
KVSTORE_API int KVStoreIsCapable(KVStoreHandle store, const char* capability, int* out_capable);

/* Rank of this worker (0 for in-process stores). Errors: NULL_POINTER. */
KVSTORE_API int KVStoreGetRank(KVStoreHandle store, int* out_rank);

/* Number of workers (1 for in-process stores). Errors: NULL_POINTER. */
KVSTORE_API int KVStoreGetGroupSize(KVStoreHandle store, int* out_size);

/* Waits until every worker has reached the barrier (immediate for in-process stores).
 * Errors: NULL_POINTER, TIMEOUT (naming the missing workers), PEER_DEAD, NETWORK. */
KVSTORE_API int KVStoreBarrier(KVStoreHandle store);

/* Blocks until every pending asynchronous operation of this store has completed, and
 * reports the pushes that failed since the last call (the first one's code; the message
 * names each push's key and server). A failed pull is reported on its outputs instead. On a
 * distributed worker, a pull of a key whose latest earlier push failed fails too, until a
 * later push of the key succeeds or this call has reported the failure. A failure never
 * makes later calls on other keys fail. Immediate for in-process stores.
 * Errors: NULL_POINTER, and distributed errors. */
KVSTORE_API int KVStoreWaitAll(KVStoreHandle store);

/* Node groups for KVStoreGetNumDeadNode; sum them to ask about several groups. */
#define KV_NODE_SCHEDULER 1
#define KV_NODE_SERVERS 2
#define KV_NODE_WORKERS 4

/* Number of nodes in the groups `node_id` whose last heartbeat is older than `timeout_sec`
 * (0 for in-process stores). Errors: NULL_POINTER, INVALID_ARGUMENT. */
KVSTORE_API int KVStoreGetNumDeadNode(KVStoreHandle store, int node_id, int timeout_sec,
                                      int* out_number);

/* Whether KVStoreFree on a worker runs a barrier of all workers first (default 1).
 * Errors: NULL_POINTER, NOT_SUPPORTED (not a distributed worker). */
KVSTORE_API int KVStoreSetBarrierBeforeExit(KVStoreHandle store, int barrier_before_exit);

/* Sends a command to every server and waits for all of them to handle it. Heads < 0 are
 * reserved for the library; the server passes heads >= 0 to its controller.
 * Errors: NULL_POINTER, INVALID_ARGUMENT, NOT_SUPPORTED (not a distributed worker), CALLBACK,
 * TIMEOUT, PEER_DEAD, NETWORK. */
KVSTORE_API int KVStoreSendCommandToServers(KVStoreHandle store, int head, const char* body);

/* Turns the calling process into the server or scheduler named by DMLC_ROLE and blocks
 * until the job ends. Updaters and `controller` (may be NULL) run on this thread. `store`
 * must have been created with a distributed type in a process whose role is not worker.
 * Errors: NULL_POINTER, NOT_SUPPORTED, and distributed errors. */
KVSTORE_API int KVStoreRunServer(KVStoreHandle store, KVController controller, void* user_data);

/* Role of this process from DMLC_ROLE (worker when unset). Never fails; return 1 or 0. */
KVSTORE_API int KVIsWorkerNode(void);
KVSTORE_API int KVIsServerNode(void);
KVSTORE_API int KVIsSchedulerNode(void);

/* ---------------------------------------------------------------------------------------- */
/* Profiling (docs/PROFILING.md)                                                             */
/* ---------------------------------------------------------------------------------------- */

/* Starts this process's profiler: from now on the library records a timeline (Chrome trace /
 * Perfetto JSON, written by KVProfileStop or at exit) and per-key counters (KVProfileGetStats)
 * for every store of the process. The timeline holds the data calls (push, pull, pushpull,
 * with their bytes), and per key: a dist worker's operations from queueing to their last
 * reply, the messages sent and received (type, key, bytes), a server's waits for the round,
 * and the reductions and optimizer applies of servers and in-process stores.
 * `path`: the timeline file; NULL or "": counters only. A distributed node writes PATH with
 * its node added before ".json" ("t.json" becomes "t.worker0.json", "t.server1.json",
 * "t.scheduler.json"); other processes write PATH itself. KVSTORE_PROFILE=PATH in the
 * environment starts the profiler when the library is loaded. Starting clears the events
 * and counters of an earlier run. At most KVSTORE_PROFILE_MAX_EVENTS events (default
 * 1000000, about 100 bytes each) are kept; later ones are counted and reported.
 * Errors: INVALID_ARGUMENT (the profiler already runs, the folder of `path` is not writable,
 * a malformed KVSTORE_PROFILE_MAX_EVENTS). */
KVSTORE_API int KVProfileStart(const char* path);

/* Stops the profiler and writes the timeline when KVProfileStart named a path; the counters
 * stay readable. Nothing to do when it does not run.
 * Errors: INVALID_ARGUMENT (the file cannot be written). */
KVSTORE_API int KVProfileStop(void);

/* Copies the per-key counters of the current or last profiler run, as a NUL-terminated JSON
 * object, into `buf` of `size` bytes; *out_size receives the bytes needed (with the NUL), also
 * when the buffer is too small (then INVALID_ARGUMENT, nothing copied; buf may be NULL with
 * size 0 to ask for the size). The object:
 *   {"node": "worker 0" ("" outside a distributed job), "running": true|false,
 *    "keys": [{"key": 3 | "name", "pushes": N, "pulls": N, "bytes_pushed": B,
 *              "bytes_pulled": B, "round_waits": N, "round_wait_us": T, "reduce_us": T,
 *              "applies": N, "apply_us": T}, ...]}
 * pushes/pulls: the key's occurrences in successful data calls (a pushpull counts both),
 * with their arrays' bytes. round_wait_us: on a dist worker, the time from queueing each of
 * the key's operations to its last reply; on a server, from each request's arrival to the
 * end of its round. reduce_us and apply_us: time summing pushed values and running the
 * updater (servers, in-process stores). Times in microseconds.
 * Errors: NULL_POINTER (out_size; buf with size > 0), INVALID_ARGUMENT (buffer too small). */
KVSTORE_API int KVProfileGetStats(char* buf, size_t size, size_t* out_size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVSTORE_KVSTORE_H_ */
