package org.kvstore;

import org.kvstore.swig.KVDeviceType;

/**
 * A device context: (device type, device id). CPU contexts with different ids all use host
 * memory; a GPU context needs a CUDA build and a device ({@link KVLibrary#gpuCount()}), else
 * creating an array on it throws {@link KVDeviceException}.
 */
public final class Context {
  private final int devType;
  private final int devId;

  private Context(int devType, int devId) {
    this.devType = devType;
    this.devId = devId;
  }

  /** cpu(0). */
  public static Context cpu() {
    return new Context(KVDeviceType.KV_CPU, 0);
  }

  /** The CPU context with the given id. */
  public static Context cpu(int id) {
    return new Context(KVDeviceType.KV_CPU, id);
  }

  /** gpu(0). */
  public static Context gpu() {
    return new Context(KVDeviceType.KV_GPU, 0);
  }

  /** The GPU context with the given id (checked when an array is created on it). */
  public static Context gpu(int id) {
    return new Context(KVDeviceType.KV_GPU, id);
  }

  /** A context from the C (dev_type, dev_id) pair. */
  public static Context of(int devType, int devId) {
    return new Context(devType, devId);
  }

  /** The C device type (KV_CPU = 1, KV_GPU = 2). */
  public int deviceType() {
    return devType;
  }

  /** The device id. */
  public int deviceId() {
    return devId;
  }

  /** True for a GPU context. */
  public boolean isGpu() {
    return devType == KVDeviceType.KV_GPU;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof Context)) return false;
    Context c = (Context) o;
    return c.devType == devType && c.devId == devId;
  }

  @Override
  public int hashCode() {
    return devType * 31 + devId;
  }

  @Override
  public String toString() {
    String kind = devType == KVDeviceType.KV_CPU ? "cpu" : devType == KVDeviceType.KV_GPU ? "gpu" : "dev" + devType;
    return kind + "(" + devId + ")";
  }
}
