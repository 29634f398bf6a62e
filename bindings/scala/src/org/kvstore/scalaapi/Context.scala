package org.kvstore.scalaapi

/**
 * A device context. `Context.gpu(i)` needs a CUDA build and that GPU ([[Context.numGpus]]);
 * arrays on an absent GPU fail with `KVDeviceException`.
 */
final class Context private[scalaapi] (private[scalaapi] val java: org.kvstore.Context) {
  def deviceType: String = if (java.isGpu) "gpu" else "cpu"

  def deviceId: Int = java.deviceId

  override def equals(o: Any): Boolean = o match {
    case c: Context => c.java == java
    case _ => false
  }

  override def hashCode: Int = java.hashCode

  override def toString: String = java.toString
}

object Context {
  def cpu(deviceId: Int = 0): Context = new Context(org.kvstore.Context.cpu(deviceId))

  def gpu(deviceId: Int = 0): Context = new Context(org.kvstore.Context.gpu(deviceId))

  /** cpu(0). */
  val defaultCtx: Context = cpu()

  /** Usable GPUs now (0 without CUDA or a device). */
  def numGpus: Int = org.kvstore.KVLibrary.gpuCount()
}
