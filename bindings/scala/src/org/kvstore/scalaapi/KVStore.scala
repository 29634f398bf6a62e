package org.kvstore.scalaapi

import org.kvstore.{KVStore => JKVStore}
import org.kvstore.{NDArray => JNDArray}

/**
 * Merges a pushed value into the stored one, in place (`stored += input * 2`). Runs on the
 * thread that called push; the arrays are borrowed for the call. An exception thrown here
 * reaches the caller of push, and the stored value stays as it was. `dispose()` is called
 * once, when the store stops using the updater (replaced, or the store disposed).
 */
trait MXKVStoreUpdater {
  def update(key: Int, recv: NDArray, local: NDArray): Unit

  def dispose(): Unit
}

object MXKVStoreUpdater {
  /** An updater from a function, with a no-op dispose. */
  def apply(f: (Int, NDArray, NDArray) => Unit): MXKVStoreUpdater = new MXKVStoreUpdater {
    override def update(key: Int, recv: NDArray, local: NDArray): Unit = f(key, recv, local)

    override def dispose(): Unit = {}
  }
}

/**
 * A key-value store (a facade over org.kvstore.KVStore): `KVStore.create("local")`,
 * `kv.init(3, value)`, `kv.push(3, value)`, `kv.pull(3, out = a)`. Keys are Ints or Strings
 * (one kind per store). Failures throw the org.kvstore.KVStoreException subclass of the C error
 * code, carrying the library's message; the store is left as it was.
 */
final class KVStore private (val java: JKVStore) extends AutoCloseable {
  private def js(values: Array[NDArray]): Array[JNDArray] =
    if (values == null) null else values.map(v => if (v == null) null else v.java)

  /** The type name given to create, lowercased. */
  def `type`: String = java.`type`()

  def numWorkers: Int = java.numWorkers()

  def rank: Int = java.rank()

  def barrier(): Unit = java.barrier()

  def waitAll(): Unit = java.waitAll()

  def numDeadNode(nodeId: Int, timeoutSec: Int = 60): Int = java.numDeadNode(nodeId, timeoutSec)

  def setBarrierBeforeExit(barrierBeforeExit: Boolean = true): Unit =
    java.setBarrierBeforeExit(barrierBeforeExit)

  /** A built-in optimizer as the updater, e.g. "sgd(learning_rate=0.1)". */
  def setOptimizer(spec: String): Unit = java.setOptimizer(spec)

  /** Writes the state of the built-in optimizer to `fname`, atomically, in the format of
   *  docs/OPTIMIZER-STATES.md (KVNotSupportedException without a built-in optimizer). */
  def saveOptimizerStates(fname: String): Unit = java.saveOptimizerStates(fname)

  /** Replaces the built-in optimizer's state with the one saved in `fname`; a bad file or a
   *  mismatch with this store throws and changes nothing. */
  def loadOptimizerStates(fname: String): Unit = java.loadOptimizerStates(fname)

  /** Compresses later pushes: `Map("type" -> "2bit", "threshold" -> 0.5)` (or "1bit"), with a
   *  residual per key; `Map("type" -> "none")` turns it off again (the residuals are dropped).
   *  float32 and float16 pushes of the device and dist_* stores are compressed; other stores
   *  throw KVNotSupportedException. See KVStore.setGradientCompression in the Java binding. */
  def setGradientCompression(params: Map[String, Any]): Unit = {
    val m = new _root_.java.util.LinkedHashMap[String, Object]()
    params.foreach { case (k, v) => m.put(k, String.valueOf(v)) }
    java.setGradientCompression(m)
  }

  /** A built-in optimizer as the updater, e.g. `new SGD(learningRate = 0.1)`. */
  def setOptimizer(optimizer: Optimizer): Unit = java.setOptimizer(optimizer.java)

  /** Whether the store has `capability` (case-insensitive): `KVStore.OPTIMIZER` is true for
   * every store type; an unknown name throws KVInvalidArgumentException naming the known ones. */
  def isCapable(capability: String): Boolean = java.isCapable(capability)

  def init(key: Int, value: NDArray): Unit = java.init(key, value.java)
  def init(keys: Array[Int], values: Array[NDArray]): Unit = java.init(keys, js(values))
  def init(key: String, value: NDArray): Unit = java.init(key, value.java)
  def init(keys: Array[String], values: Array[NDArray]): Unit = java.init(keys, js(values))

  def push(key: Int, value: NDArray): Unit = java.push(key, value.java)
  def push(key: Int, value: NDArray, priority: Int): Unit = java.push(key, value.java, priority)
  def push(key: Int, values: Array[NDArray]): Unit = java.push(key, js(values))
  def push(key: Int, values: Array[NDArray], priority: Int): Unit = java.push(key, js(values), priority)
  def push(keys: Array[Int], values: Array[NDArray]): Unit = java.push(keys, js(values))
  def push(keys: Array[Int], values: Array[NDArray], priority: Int): Unit =
    java.push(keys, js(values), priority)
  def push(key: String, value: NDArray): Unit = java.push(key, value.java)
  def push(key: String, value: NDArray, priority: Int): Unit = java.push(key, value.java, priority)
  def push(key: String, values: Array[NDArray]): Unit = java.push(key, js(values))
  def push(key: String, values: Array[NDArray], priority: Int): Unit =
    java.push(key, js(values), priority)
  def push(keys: Array[String], values: Array[NDArray]): Unit = java.push(keys, js(values))
  def push(keys: Array[String], values: Array[NDArray], priority: Int): Unit =
    java.push(keys, js(values), priority)

  def pull(key: Int, out: NDArray): Unit = java.pull(key, out.java)
  def pull(key: Int, out: NDArray, priority: Int): Unit = java.pull(key, out.java, priority)
  def pull(key: Int, outs: Array[NDArray]): Unit = java.pull(key, js(outs))
  def pull(key: Int, outs: Array[NDArray], priority: Int): Unit = java.pull(key, js(outs), priority)
  def pull(keys: Array[Int], outs: Array[NDArray]): Unit = java.pull(keys, js(outs))
  def pull(keys: Array[Int], outs: Array[NDArray], priority: Int): Unit =
    java.pull(keys, js(outs), priority)
  def pull(key: String, out: NDArray): Unit = java.pull(key, out.java)
  def pull(key: String, out: NDArray, priority: Int): Unit = java.pull(key, out.java, priority)
  def pull(key: String, outs: Array[NDArray]): Unit = java.pull(key, js(outs))
  def pull(key: String, outs: Array[NDArray], priority: Int): Unit =
    java.pull(key, js(outs), priority)
  def pull(keys: Array[String], outs: Array[NDArray]): Unit = java.pull(keys, js(outs))
  def pull(keys: Array[String], outs: Array[NDArray], priority: Int): Unit =
    java.pull(keys, js(outs), priority)

  /** Push then pull of the same key, as one call. */
  def pushPull(key: Int, value: NDArray, out: NDArray): Unit = java.pushPull(key, value.java, out.java)
  def pushPull(keys: Array[Int], values: Array[NDArray], outs: Array[NDArray]): Unit =
    java.pushPull(keys, js(values), keys, js(outs), 0)
  def pushPull(key: String, value: NDArray, out: NDArray): Unit = java.pushPull(key, value.java, out.java)
  def pushPull(keys: Array[String], values: Array[NDArray], outs: Array[NDArray]): Unit =
    java.pushPull(keys, js(values), keys, js(outs), 0)

  /** Init then pull. */
  def broadcast(key: Int, value: NDArray, out: NDArray): Unit = java.broadcast(key, value.java, out.java)
  def broadcast(keys: Array[Int], values: Array[NDArray], outs: Array[NDArray]): Unit =
    java.broadcast(keys, js(values), keys, js(outs), 0)
  def broadcast(key: String, value: NDArray, out: NDArray): Unit = java.broadcast(key, value.java, out.java)
  def broadcast(keys: Array[String], values: Array[NDArray], outs: Array[NDArray]): Unit =
    java.broadcast(keys, js(values), keys, js(outs), 0)

  /** Row-sparse pull: each output (a row_sparse array of the key's shape and dtype, e.g. from
   *  `NDArray.rowSparseZeros`) then holds exactly the rows of the key's value named by its
   *  row ids (a dense array of integral values, any order, repeats allowed), replacing what it
   *  held. One `rowIds` array may serve every output. A failure changes no output. */
  def rowSparsePull(key: Int, out: NDArray, rowIds: NDArray): Unit =
    java.rowSparsePull(key, out.java, rowIds.java)
  def rowSparsePull(key: Int, out: NDArray, rowIds: NDArray, priority: Int): Unit =
    java.rowSparsePull(key, out.java, rowIds.java, priority)
  def rowSparsePull(key: Int, outs: Array[NDArray], rowIds: NDArray): Unit =
    java.rowSparsePull(key, js(outs), rowIds.java)
  def rowSparsePull(keys: Array[Int], outs: Array[NDArray], rowIds: NDArray): Unit =
    java.rowSparsePull(keys, js(outs), rowIds.java)
  def rowSparsePull(keys: Array[Int], outs: Array[NDArray], rowIds: Array[NDArray]): Unit =
    java.rowSparsePull(keys, js(outs), js(rowIds))
  def rowSparsePull(key: String, out: NDArray, rowIds: NDArray): Unit =
    java.rowSparsePull(key, out.java, rowIds.java)
  def rowSparsePull(key: String, out: NDArray, rowIds: NDArray, priority: Int): Unit =
    java.rowSparsePull(key, out.java, rowIds.java, priority)
  def rowSparsePull(key: String, outs: Array[NDArray], rowIds: NDArray): Unit =
    java.rowSparsePull(key, js(outs), rowIds.java)
  def rowSparsePull(keys: Array[String], outs: Array[NDArray], rowIds: NDArray): Unit =
    java.rowSparsePull(keys, js(outs), rowIds.java)
  def rowSparsePull(keys: Array[String], outs: Array[NDArray], rowIds: Array[NDArray]): Unit =
    java.rowSparsePull(keys, js(outs), js(rowIds))

  /** Sets the updater for int keys (`null` restores assign). */
  def setUpdater(updater: MXKVStoreUpdater): Unit =
    java.setUpdater(if (updater == null) null else new KVStore.IntBridge(updater))

  /** Sets the updater for String keys, which receives the original key. */
  def setStrUpdater(f: (String, NDArray, NDArray) => Unit): Unit =
    java.setStrUpdater(if (f == null) null else new KVStore.StrBridge(f))

  /** Releases the store now (its updater's dispose() runs). */
  def dispose(): Unit = java.close()

  override def close(): Unit = java.close()

  override def toString: String = java.toString
}

object KVStore {
  val GROUP_NODE_SCHEDULER: Int = JKVStore.GROUP_NODE_SCHEDULER
  val GROUP_NODE_SERVER: Int = JKVStore.GROUP_NODE_SERVER
  val GROUP_NODE_WORKER: Int = JKVStore.GROUP_NODE_WORKER

  /** The capability of running built-in optimizers, for `isCapable`. */
  val OPTIMIZER: String = JKVStore.OPTIMIZER

  /** Creates a store: "local", "device", "nccl", "dist_sync", ... */
  def create(name: String = "local"): KVStore = new KVStore(JKVStore.create(name))

  private final class IntBridge(u: MXKVStoreUpdater) extends org.kvstore.Updater {
    override def update(key: Int, recv: JNDArray, stored: JNDArray): Unit =
      u.update(key, new NDArray(recv), new NDArray(stored))

    override def released(): Unit = u.dispose()
  }

  private final class StrBridge(f: (String, NDArray, NDArray) => Unit) extends org.kvstore.StrUpdater {
    override def update(key: String, recv: JNDArray, stored: JNDArray): Unit =
      f(key, new NDArray(recv), new NDArray(stored))
  }
}
