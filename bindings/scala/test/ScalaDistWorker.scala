// A worker of a real distributed job (started by kvstore-launch; see ../CMakeLists.txt), over
// the org.kvstore.scalaapi facade. A worker refuses updaters (they run on the servers):
// setUpdater and setStrUpdater must throw KVNotSupportedException, and the registration the
// Java binding prepared must be released exactly once by the binding itself, since the library
// never runs the free hook of a refused registration: no dispose() call, no second
// DeleteGlobalRef (run under -Xcheck:jni), no leaked global reference (the refused updater
// becomes collectable). The store must work normally afterwards. Prints "PASS ..." and
// "N passed, N failed"; exits 1 on failure.
import java.lang.ref.WeakReference
import java.util.concurrent.atomic.AtomicInteger

import org.kvstore.KVNotSupportedException
import org.kvstore.scalaapi.{KVStore, MXKVStoreUpdater, NDArray, Shape}

object ScalaDistWorker {
  private var passed = 0
  private var failed = 0

  private def check(what: String, ok: Boolean): Unit =
    if (ok) passed += 1 else { failed += 1; println(s"FAIL: $what") }

  private def settle(): Unit = (1 to 3).foreach { _ => System.gc(); Thread.sleep(50) }

  private def alive(refs: Seq[WeakReference[AnyRef]]): Int = refs.count(_.get != null)

  private def refused(body: => Unit): Boolean =
    try { body; false } catch { case _: KVNotSupportedException => true }

  /**
   * Tries to register a fresh updater (int or String keys); returns whether it was refused and
   * a weak reference to it, which clears once nothing (the binding's global reference, through
   * the facade's bridge, included) holds it.
   */
  private def refusedRegistration(kv: KVStore, str: Boolean,
                                  disposed: AtomicInteger): (Boolean, WeakReference[AnyRef]) =
    if (str) {
      // Captures a fresh counter, so that each try is a distinct function object.
      val calls = new AtomicInteger()
      val f: (String, NDArray, NDArray) => Unit = { (_, recv, stored) =>
        calls.incrementAndGet(); stored += recv
      }
      (refused(kv.setStrUpdater(f)), new WeakReference[AnyRef](f))
    } else {
      val u = new MXKVStoreUpdater {
        override def update(key: Int, recv: NDArray, local: NDArray): Unit = local += recv
        override def dispose(): Unit = disposed.incrementAndGet()
      }
      (refused(kv.setUpdater(u)), new WeakReference[AnyRef](u))
    }

  def main(args: Array[String]): Unit = {
    val tries = 100
    val kv = KVStore.create("dist_sync")
    try {
      val rank = kv.rank
      val workers = kv.numWorkers

      val disposed = new AtomicInteger()
      val results = (0 until tries).flatMap { _ =>
        Seq(refusedRegistration(kv, str = false, disposed), refusedRegistration(kv, str = true, disposed))
      }
      val nRefused = results.count(_._1)
      check(s"every setUpdater/setStrUpdater on a worker throws KVNotSupportedException " +
            s"($nRefused of ${2 * tries})", nRefused == 2 * tries)
      check(s"dispose() never runs for a refused registration (ran ${disposed.get} times)",
            disposed.get == 0)
      val probes = results.map(_._2)
      var i = 0
      while (i < 50 && alive(probes) > 0) { settle(); i += 1 }
      check(s"every refused updater is collectable: the binding deleted its global reference " +
            s"(${alive(probes)} still reachable)", alive(probes) == 0)
      check("a null updater is refused the same way", refused(kv.setUpdater(null)))

      // The store is unaffected: a sync round sums every worker's push.
      val s = Shape(4)
      val init = NDArray.zeros(s)
      val v = NDArray.array(Array.fill(4)((rank + 1).toFloat), s)
      val out = NDArray.zeros(s)
      try {
        kv.init(7, init)
        kv.push(7, v)
        kv.pull(7, out)
        val want = workers * (workers + 1) / 2f
        val got = out.toArray
        check(s"a sync round after the refusals sums every worker's push (want $want, got " +
              s"${got.mkString("[", ", ", "]")})", got.length == 4 && got.forall(_ == want))
      } finally {
        init.close(); v.close(); out.close()
      }
      if (failed == 0) println(s"PASS scala dist worker $rank: updaters refused")
    } catch {
      case t: Throwable =>
        failed += 1
        println(s"FAIL: threw $t")
        t.printStackTrace(System.out)
    } finally {
      kv.close()
    }
    println(s"$passed passed, $failed failed")
    System.exit(if (failed == 0) 0 else 1)
  }
}
