package org.kvstore;

import org.kvstore.swig.KVStorageType;

/**
 * How an {@link NDArray} stores its elements; the codes are the C KVStorageType values and
 * the names the reference's ({@code stype}: "default", "row_sparse").
 */
public enum StorageType {
  /** Every element stored. */
  DEFAULT(KVStorageType.KV_STYPE_DEFAULT, "default"),
  /**
   * Only some rows along the first axis: their ids (increasing) and a dense block of those
   * rows; every other row reads as zero. Host memory only.
   */
  ROW_SPARSE(KVStorageType.KV_STYPE_ROW_SPARSE, "row_sparse");

  private final int code;
  private final String label;

  StorageType(int code, String label) {
    this.code = code;
    this.label = label;
  }

  /** The C KVStorageType value. */
  public int code() {
    return code;
  }

  /** The storage type for a C code. */
  public static StorageType fromCode(int code) {
    for (StorageType t : values()) {
      if (t.code == code) return t;
    }
    throw new KVInvalidArgumentException("unknown storage type code " + code);
  }

  /** The storage type named "default" or "row_sparse" (the reference's stype names). */
  public static StorageType fromName(String name) {
    for (StorageType t : values()) {
      if (t.label.equalsIgnoreCase(name)) return t;
    }
    throw new KVInvalidArgumentException(
        "unknown storage type '" + name + "' (valid: default, row_sparse)");
  }

  @Override
  public String toString() {
    return label;
  }
}
