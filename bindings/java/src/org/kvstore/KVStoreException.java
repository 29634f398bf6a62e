package org.kvstore;

/**
 * Base of every error the library reports. Each C error code has its own generated subclass
 * (KVShapeMismatchException, KVUnknownKeyException, ...; see {@link KVErrors}), so callers can
 * catch exactly the failure they handle. The message is the library's own (KVGetLastError),
 * which names the key, shapes and dtypes involved.
 */
public class KVStoreException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int code;
  private final String codeName;

  /**
   * @param code the negative KV_ERR_* code
   * @param codeName its symbolic name, e.g. "KV_ERR_SHAPE_MISMATCH"
   * @param message the library's message
   */
  public KVStoreException(int code, String codeName, String message) {
    super(message);
    this.code = code;
    this.codeName = codeName;
  }

  /** The C error code (negative). */
  public int getCode() {
    return code;
  }

  /** The symbolic name of the code, e.g. "KV_ERR_SHAPE_MISMATCH". */
  public String getCodeName() {
    return codeName;
  }
}
