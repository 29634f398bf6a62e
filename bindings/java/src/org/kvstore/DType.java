package org.kvstore;

import org.kvstore.swig.KVDType;
import org.kvstore.swig.KVStoreLib;

/**
 * Element types; the codes are the C KVDType values. The names and element sizes come from
 * the library (KVDTypeName, KVDTypeSize) when the class loads, so they cannot drift from it; a
 * constant the library does not know fails the load.
 */
public enum DType {
  FLOAT32(KVDType.KV_FLOAT32),
  FLOAT64(KVDType.KV_FLOAT64),
  /** IEEE binary16, exchanged with Java as short bit patterns (see {@link Float16}). */
  FLOAT16(KVDType.KV_FLOAT16),
  UINT8(KVDType.KV_UINT8),
  INT32(KVDType.KV_INT32),
  INT64(KVDType.KV_INT64);

  private final int code;
  private final int size;
  private final String label;

  DType(int code) {
    this.code = code;
    this.label = KVStoreLib.KVDTypeName(code);
    this.size = (int) KVStoreLib.KVDTypeSize(code);
    if (label == null || size <= 0) {
      throw new IllegalStateException("the kvstore library has no dtype " + code + " (" + name() + ")");
    }
  }

  /** The C KVDType value. */
  public int code() {
    return code;
  }

  /** Bytes per element. */
  public int size() {
    return size;
  }

  /** The dtype for a C code. */
  public static DType fromCode(int code) {
    for (DType t : values()) {
      if (t.code == code) return t;
    }
    throw new KVInvalidArgumentException("unknown dtype code " + code);
  }

  /** The dtype named "float32", "float64", "float16", "uint8", "int32" or "int64". */
  public static DType fromName(String name) {
    for (DType t : values()) {
      if (t.label.equalsIgnoreCase(name)) return t;
    }
    StringBuilder valid = new StringBuilder();
    for (DType t : values()) valid.append(valid.length() == 0 ? "" : ", ").append(t.label);
    throw new KVInvalidArgumentException("unknown dtype '" + name + "' (valid: " + valid + ")");
  }

  @Override
  public String toString() {
    return label;
  }
}
