package org.kvstore;

import org.kvstore.swig.KVDType;

/** Element types; the codes are the C KVDType values. */
public enum DType {
  FLOAT32(KVDType.KV_FLOAT32, 4, "float32"),
  FLOAT64(KVDType.KV_FLOAT64, 8, "float64"),
  /** IEEE binary16, exchanged with Java as short bit patterns. */
  FLOAT16(KVDType.KV_FLOAT16, 2, "float16"),
  UINT8(KVDType.KV_UINT8, 1, "uint8"),
  INT32(KVDType.KV_INT32, 4, "int32"),
  INT64(KVDType.KV_INT64, 8, "int64");

  private final int code;
  private final int size;
  private final String label;

  DType(int code, int size, String label) {
    this.code = code;
    this.size = size;
    this.label = label;
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
    throw new KVInvalidArgumentException(
        "unknown dtype '" + name + "' (valid: float32, float64, float16, uint8, int32, int64)");
  }

  @Override
  public String toString() {
    return label;
  }
}
