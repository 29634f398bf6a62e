package org.kvstore;

import org.kvstore.swig.KVFeature;
import org.kvstore.swig.KVStoreLib;

/** Facts about the loaded native library. */
public final class KVLibrary {
  private KVLibrary() {}

  /** The version as MAJOR*10000 + MINOR*100 + PATCH. */
  public static int version() {
    return KVStoreLib.KVGetVersion();
  }

  /** The version as "MAJOR.MINOR.PATCH". */
  public static String versionString() {
    return KVStoreLib.KVGetVersionString();
  }

  /** Whether the library was built with CUDA kernels. */
  public static boolean hasCuda() {
    return KVStoreLib.KVHasFeature(KVFeature.KV_FEATURE_CUDA) != 0;
  }

  /** Whether the library was built with the nccl store. */
  public static boolean hasNccl() {
    return KVStoreLib.KVHasFeature(KVFeature.KV_FEATURE_NCCL) != 0;
  }

  /** Whether the library was built with the distributed stores. */
  public static boolean hasDist() {
    return KVStoreLib.KVHasFeature(KVFeature.KV_FEATURE_DIST) != 0;
  }

  /** Usable GPUs now (0 without CUDA or a device). */
  public static int gpuCount() {
    int[] n = new int[1];
    KVStoreLib.KVGetGpuCount(n);
    return n[0];
  }

  /** The symbolic name of an error code. */
  public static String errorName(int code) {
    return KVStoreLib.KVErrorName(code);
  }
}
