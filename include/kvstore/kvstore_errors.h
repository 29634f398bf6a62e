/*
 * kvstore_errors.h - the enumerated error table of libkvstore.
 *
 * Every fallible function of the C ABI returns 0 on success or one of the negative codes
 * below. The numeric values are part of the ABI and never change meaning; new codes are
 * only ever appended. KVGetLastError() (kvstore.h) gives the calling thread's message for
 * the most recent failure; KVErrorName() gives the stable symbolic name of a code.
 *
 * KV_ERROR_TABLE is an X-macro so that bindings can generate one exception class per code
 * from this single list: X(SYMBOL, value, "description").
 */
#ifndef KVSTORE_ERRORS_H_
#define KVSTORE_ERRORS_H_

#define KV_ERROR_TABLE(X)                                                                  \
  X(INVALID_ARGUMENT, -1, "an argument is out of range or malformed")                    \
  X(NULL_POINTER, -2, "a required handle or pointer argument is NULL")                   \
  X(UNKNOWN_KEY, -3, "the key was never initialised in this store")                       \
  X(DUPLICATE_KEY, -4, "the key is already initialised")                                  \
  X(KEY_KIND_MISMATCH, -5, "int and string keys mixed in one store")                      \
  X(SHAPE_MISMATCH, -6, "array shapes differ")                                            \
  X(DTYPE_MISMATCH, -7, "array dtypes differ")                                            \
  X(DEVICE, -8, "the device context is not available")                                    \
  X(NOT_SUPPORTED, -9, "the operation is not supported by this store or this build")      \
  X(OUT_OF_MEMORY, -10, "memory allocation failed")                                       \
  X(TIMEOUT, -11, "a wait ran past its timeout")                                           \
  X(NETWORK, -12, "a network transport error")                                             \
  X(PEER_DEAD, -13, "a peer node stopped responding")                                     \
  X(PROTOCOL, -14, "a malformed or unexpected message was received")                      \
  X(CUDA, -15, "a CUDA runtime call failed")                                               \
  X(NCCL, -16, "an NCCL call failed")                                                      \
  X(CALLBACK, -17, "a user callback returned a failure")                                  \
  X(INTERNAL, -18, "an internal invariant was violated")                                  \
  X(BUSY, -19, "the handle is in use by a call that has not returned")

/* Error codes. Success is KV_OK (0); every failure is negative. */
typedef enum KVErrorCode {
  KV_OK = 0,
#define KV_ERROR_ENUM_ENTRY_(sym, val, desc) KV_ERR_##sym = (val),
  KV_ERROR_TABLE(KV_ERROR_ENUM_ENTRY_)
#undef KV_ERROR_ENUM_ENTRY_
  KV_ERR_LAST_ = -19
} KVErrorCode;

#endif /* KVSTORE_ERRORS_H_ */
