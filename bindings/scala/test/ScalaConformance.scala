// Scala conformance suite over the org.kvstore.scalaapi facade: the seed tutorial's numbers and
// scenarios C1-C14 of bindings/conformance/SCENARIOS.md. Ends with "N passed, N failed" and
// exits 1 on any failure.
import java.lang.ref.WeakReference

import scala.collection.mutable.ArrayBuffer
import scala.reflect.ClassTag

import org.kvstore._
import org.kvstore.scalaapi.{Adam, AdaGrad, Context, KVStore, MXKVStoreUpdater, NAG, NDArray, RMSProp, SGD,
                             Shape, Test}

object ScalaConformance {
  private var passed = 0
  private var failed = 0
  private val s23 = Shape(2, 3)

  private def check(what: String, ok: Boolean): Unit =
    if (ok) passed += 1 else { failed += 1; println(s"FAIL: $what") }

  private def checkEq[T](what: String, expected: T, actual: T): Unit =
    check(s"$what (expected $expected, got $actual)", expected == actual)

  private def checkAll(what: String, expected: Float, a: NDArray): Unit = {
    val v = a.toArray
    check(s"$what (expected all $expected, got ${v.mkString("[", ", ", "]")})",
          v.nonEmpty && v.forall(_ == expected))
  }

  private def expectThrows[T <: Throwable](what: String)(body: => Any)(implicit ct: ClassTag[T]): Option[T] =
    try {
      body
      failed += 1
      println(s"FAIL: $what: expected ${ct.runtimeClass.getSimpleName}, nothing thrown")
      None
    } catch {
      case t: Throwable if ct.runtimeClass.isInstance(t) =>
        passed += 1
        Some(t.asInstanceOf[T])
      case t: Throwable =>
        failed += 1
        println(s"FAIL: $what: expected ${ct.runtimeClass.getSimpleName}, got $t")
        None
    }

  private def checkMessage(what: String, t: Option[Throwable], parts: String*): Unit =
    t.foreach { e =>
      val m = String.valueOf(e.getMessage)
      parts.foreach(p => check(s"""$what: message "$m" names $p""", m.contains(p)))
    }

  private def scenario(name: String)(body: => Unit): Unit = {
    println(s"== $name")
    try body
    catch {
      case t: Throwable =>
        failed += 1
        println(s"FAIL: $name threw $t")
        t.printStackTrace(System.out)
    }
  }

  private def filled(v: Float): NDArray = NDArray.full(s23, v)

  /** A push of `bad` to key 3, which holds 2s, is refused with T naming `parts`; nothing changes. */
  private def refusedPush[T <: Throwable: ClassTag](what: String, bad: => NDArray, parts: String*): Unit = {
    val kv = KVStore.create("local")
    kv.init(3, filled(2))
    checkMessage(what, expectThrows[T](what)(kv.push(3, bad)), parts: _*)
    val out = NDArray.zeros(s23)
    kv.pull(3, out)
    checkAll("unchanged", 2f, out)
    kv.dispose()
  }

  // In its own method so that no local slot of the caller keeps the updater reachable.
  private def registerUpdater(kv: KVStore): WeakReference[MXKVStoreUpdater] = {
    val u = MXKVStoreUpdater((_, input, stored) => stored += input)
    kv.setUpdater(u)
    new WeakReference[MXKVStoreUpdater](u)
  }

  private def gpu(i: Int): Context = if (i < Context.numGpus) Context.gpu(i) else Context.cpu(i)

  def main(args: Array[String]): Unit = {
    scenario("C1 tutorial replay") {
      val kv = KVStore.create("local")
      val shape = Shape(2, 3)
      kv.init(3, NDArray.ones(shape) * 2)
      val a = NDArray.zeros(shape)
      kv.pull(3, out = a)
      checkAll("init then pull", 2f, a)
      kv.push(3, NDArray.ones(shape) * 8)
      kv.pull(3, out = a)
      checkAll("push assigns", 8f, a)
      val gpus = Array(gpu(0), gpu(1), gpu(2), gpu(3))
      val b = gpus.map(c => NDArray.ones(shape, c))
      kv.push(3, b)
      kv.pull(3, out = a)
      checkAll("four values summed", 4f, a)
      val calls = ArrayBuffer[Int]()
      var disposed = 0
      val updater = new MXKVStoreUpdater {
        override def update(key: Int, input: NDArray, stored: NDArray): Unit = {
          calls += key
          stored += input * 2
        }
        override def dispose(): Unit = disposed += 1
      }
      kv.setUpdater(updater)
      kv.pull(3, a)
      checkAll("setting an updater changes nothing", 4f, a)
      kv.push(3, NDArray.ones(shape))
      kv.pull(3, a)
      checkAll("stored += input * 2", 6f, a)
      checkEq("updater called for key 3", Seq(3), calls.toSeq)
      val b2 = gpus.map(c => NDArray.ones(shape, c))
      kv.pull(3, outs = b2)
      b2.zipWithIndex.foreach { case (x, i) => checkAll(s"pull into device $i", 6f, x) }
      calls.clear()
      val keys = Array(5, 7, 9)
      kv.init(keys, Array.fill(keys.length)(NDArray.ones(shape)))
      kv.push(keys, Array.fill(keys.length)(NDArray.ones(shape)))
      checkEq("updater called for 5, 7, 9", Seq(5, 7, 9), calls.toSeq)
      val c = Array.fill(keys.length)(NDArray.zeros(shape))
      kv.pull(keys, outs = c)
      c.foreach(x => checkAll("list pull", 3f, x))
      checkEq("type", "local", kv.`type`)
      kv.dispose()
      checkEq("dispose() of the updater ran once when the store was disposed", 1, disposed)
    }

    scenario("C2 shape mismatch on push") {
      refusedPush[KVShapeMismatchException]("push (3,2) to a (2,3) key", NDArray.ones(Shape(3, 2)),
        "3", "(2,3)", "(3,2)")
    }

    scenario("C3 dtype mismatch on push") {
      refusedPush[KVDtypeMismatchException]("push float64 to float32",
        NDArray.ones(s23, dtype = DType.FLOAT64), "float32", "float64")
    }

    scenario("C4 unknown key on push and pull") {
      val kv = KVStore.create("local")
      kv.init(3, filled(2))
      checkMessage("push", expectThrows[KVUnknownKeyException]("push unknown")(kv.push(42, filled(1))), "42")
      val out = filled(7)
      checkMessage("pull", expectThrows[KVUnknownKeyException]("pull unknown")(kv.pull(42, out)), "42")
      checkAll("pull output not written", 7f, out)
      kv.dispose()
    }

    scenario("C5 duplicate init") {
      val kv = KVStore.create("local")
      kv.init(3, filled(2))
      expectThrows[KVDuplicateKeyException]("second init")(kv.init(3, filled(5)))
      val out = NDArray.zeros(s23)
      kv.pull(3, out)
      checkAll("first value kept", 2f, out)
      kv.dispose()
    }

    scenario("C6 mixed key kinds") {
      val kv = KVStore.create("local")
      kv.init(3, filled(2))
      expectThrows[KVKeyKindMismatchException]("string key in an int store")(kv.push("3", filled(1)))
      val out = NDArray.zeros(s23)
      kv.pull(3, out)
      checkAll("int store unchanged", 2f, out)
      kv.dispose()
      val ks = KVStore.create("local")
      ks.init("3", filled(4))
      expectThrows[KVKeyKindMismatchException]("int key in a string store")(ks.pull(3, out))
      ks.pull("3", out)
      checkAll("string store unchanged", 4f, out)
      ks.dispose()
    }

    scenario("C7 updater raises") {
      val kv = KVStore.create("local")
      kv.init(3, filled(2))
      val boom = new IllegalStateException("boom")
      kv.setUpdater(MXKVStoreUpdater { (_, input, stored) => stored += input; throw boom })
      val got = expectThrows[IllegalStateException]("updater exception reaches push")(kv.push(3, filled(1)))
      check("the very exception the updater threw", got.exists(_ eq boom))
      val out = NDArray.zeros(s23)
      kv.pull(3, out)
      checkAll("unchanged after the failed push", 2f, out)
      kv.setUpdater(MXKVStoreUpdater((_, input, stored) => stored += input))
      kv.push(3, filled(1))
      kv.pull(3, out)
      checkAll("a good updater afterwards", 3f, out)
      kv.dispose()
    }

    scenario("C8 stateful updater") {
      val kv = KVStore.create("local")
      kv.init(Array(1, 2), Array(filled(0), filled(100)))
      val counts = scala.collection.mutable.Map[Int, Int]()
      val log = ArrayBuffer[String]()
      kv.setUpdater(MXKVStoreUpdater { (key, input, stored) =>
        val n = counts.getOrElse(key, 0) + 1
        counts(key) = n
        log += s"$key#$n"
        stored += input * n.toFloat
      })
      kv.push(1, filled(1)); kv.push(1, filled(1)); kv.push(2, filled(1)); kv.push(1, filled(1))
      checkEq("call sequence", Seq("1#1", "1#2", "2#1", "1#3"), log.toSeq)
      val out = NDArray.zeros(s23)
      kv.pull(1, out)
      checkAll("key 1 = 1+2+3", 6f, out)
      kv.pull(2, out)
      checkAll("key 2 = 100+1", 101f, out)
      kv.dispose()
    }

    scenario("C9 int and string keys") {
      val ki = KVStore.create("local")
      ki.init(Array(0, 1), Array(filled(1), filled(2)))
      ki.push(1, filled(5))
      val out = NDArray.zeros(s23)
      ki.pull(1, out)
      checkAll("int keys", 5f, out)
      ki.dispose()
      val ks = KVStore.create("local")
      ks.init(Array("w", "b"), Array(filled(1), filled(2)))
      val seen = ArrayBuffer[String]()
      ks.setStrUpdater { (key, input, stored) => seen += key; stored += input }
      ks.push("b", filled(3))
      ks.pull("b", out)
      checkAll("string updater merged", 5f, out)
      checkEq("string updater gets the key", Seq("b"), seen.toSeq)
      ks.dispose()
    }

    scenario("C10 lists") {
      val kv = KVStore.create("local")
      kv.init(3, filled(0))
      kv.push(3, Array(filled(1), filled(2), filled(3)))
      val outs = Array(filled(-1), filled(-1), filled(-1))
      kv.pull(3, outs = outs)
      outs.foreach(o => checkAll("sum 1+2+3 into every output", 6f, o))
      kv.init(Array(10, 11), Array(filled(0), filled(0)))
      kv.push(Array(10, 11, 10), Array(filled(1), filled(2), filled(3)))
      kv.pull(Array(10, 11), Array(outs(0), outs(1)))
      checkAll("key 10 = 1+3", 4f, outs(0))
      checkAll("key 11 = 2", 2f, outs(1))
      expectThrows[KVInvalidArgumentException]("lists of different lengths") {
        kv.push(Array(10, 11), Array(filled(1)))
      }
      kv.dispose()
    }

    scenario("C11 pushpull and broadcast") {
      val kv = KVStore.create("local")
      kv.init(3, filled(1))
      kv.setUpdater(MXKVStoreUpdater((_, input, stored) => stored += input))
      val out = NDArray.zeros(s23)
      kv.pushPull(3, filled(5), out)
      checkAll("pushpull merged", 6f, out)
      kv.broadcast(4, filled(7), out)
      checkAll("broadcast", 7f, out)
      expectThrows[KVDuplicateKeyException]("second broadcast")(kv.broadcast(4, filled(8), out))
      kv.pull(4, out)
      checkAll("first broadcast kept", 7f, out)
      kv.dispose()
    }

    scenario("C12 dtypes") {
      val kv = KVStore.create("local")
      val s = Shape(3)
      val types = Seq(DType.FLOAT32, DType.FLOAT64, DType.FLOAT16, DType.INT32, DType.INT64, DType.UINT8)
      types.zipWithIndex.foreach { case (t, k) =>
        kv.init(k, NDArray.full(s, 3f, dtype = t))
        kv.push(k, Array(NDArray.full(s, 2f, dtype = t), NDArray.full(s, 5f, dtype = t)))
        val out = NDArray.zeros(s, dtype = t)
        kv.pull(k, out)
        checkEq(s"$t dtype kept", t, out.dtype)
        checkEq(s"$t round trip of 2+5", Seq(7f, 7f, 7f), out.toArray.toSeq)
      }
      kv.dispose()
    }

    scenario("C13 type name") {
      val kv = KVStore.create("LOCAL")
      checkEq("lowercased", "local", kv.`type`)
      checkEq("rank", 0, kv.rank)
      checkEq("workers", 1, kv.numWorkers)
      kv.dispose()
      val e = expectThrows[KVInvalidArgumentException]("unknown type")(KVStore.create("nope"))
      checkMessage("unknown type", e, "nope", "local", "dist_sync")
    }

    scenario("C14 release") {
      def rssKb(): Long = scala.io.Source.fromFile("/proc/self/status").getLines()
        .find(_.startsWith("VmRSS:")).map(_.replaceAll("[^0-9]", "").toLong).getOrElse(-1L)
      def settle(): Unit = (1 to 3).foreach { _ => System.gc(); Thread.sleep(50) }
      val s = Shape(256)
      def cycles(n: Int): Unit = (1 to n).foreach { i => val a = NDArray.zeros(s); a.set(i.toFloat); a.dispose() }
      cycles(20000)
      settle()
      val before = rssKb()
      cycles(100000)
      settle()
      val after = rssKb()
      println(s"   10^5 array cycles: RSS $before kB -> $after kB")
      check(s"array cycles: RSS growth ${after - before} kB below 16 MiB", after - before < 16 * 1024)

      def storeCycle(): Unit = {
        val kv = KVStore.create("local")
        kv.setUpdater(MXKVStoreUpdater((_, input, stored) => stored += input))
        val v = NDArray.ones(Shape(1024))
        kv.init(1, v)
        kv.push(1, v)
        v.dispose()
        kv.dispose()
      }
      (1 to 200).foreach(_ => storeCycle())
      settle()
      val sb = rssKb()
      (1 to 1000).foreach(_ => storeCycle())
      settle()
      val sa = rssKb()
      println(s"   10^3 store cycles: RSS $sb kB -> $sa kB")
      check(s"store cycles: RSS growth ${sa - sb} kB below 16 MiB", sa - sb < 16 * 1024)

      // The free hook releases the JNI global ref: the updater becomes collectable.
      val kv = KVStore.create("local")
      val weak = registerUpdater(kv)
      settle()
      check("registered updater kept alive", weak.get != null)
      kv.dispose()
      var tries = 0
      while (weak.get != null && tries < 50) { settle(); tries += 1 }
      check("updater collectable after the store was disposed", weak.get == null)
    }

    // Issue 10: closing a store or an array while a call on it runs throws KVBusyException
    // (KV_ERR_BUSY) and frees nothing; both stay usable.
    scenario("dispose during a call is refused (BUSY)") {
      val kv = KVStore.create("local")
      val v = filled(1)
      val out = NDArray.zeros(s23)
      kv.init(3, filled(2))
      val entered = new java.util.concurrent.CountDownLatch(1)
      val proceed = new java.util.concurrent.CountDownLatch(1)
      kv.setUpdater(MXKVStoreUpdater { (_, input, stored) =>
        entered.countDown()
        proceed.await()
        stored += input
      })
      @volatile var pushError: Throwable = null
      val pusher = new Thread(new Runnable {
        override def run(): Unit = try kv.pushPull(3, v, out) catch { case t: Throwable => pushError = t }
      })
      pusher.start()
      entered.await()
      val busy = expectThrows[KVBusyException]("dispose() of the store while another thread's push runs")(kv.dispose())
      checkMessage("store busy", busy, "in use", "stays usable")
      expectThrows[KVBusyException]("dispose() of the pushed array meanwhile")(v.dispose())
      expectThrows[KVBusyException]("dispose() of the pushpull output meanwhile")(out.dispose())
      checkEq("the store answers other calls meanwhile", "local", kv.`type`)
      proceed.countDown()
      pusher.join(10000)
      check(s"the push finished and succeeded ($pushError)", !pusher.isAlive && pushError == null)
      checkAll("with the pushed value merged", 3f, out)
      check("the arrays stayed usable", !v.isDisposed && !out.isDisposed)

      kv.setUpdater(MXKVStoreUpdater((_, _, _) => kv.dispose()))
      expectThrows[KVBusyException]("dispose() from inside the store's own updater")(kv.push(3, v))
      kv.setUpdater(null)
      kv.push(3, v)
      kv.pull(3, out = out)
      checkAll("the store is usable after the refused disposes", 1f, out)
      kv.dispose()
      v.dispose()
      out.dispose()
      check("disposed once no call runs", v.isDisposed && out.isDisposed)
    }

    // Optimizer states: resuming from a saved state is bit-identical to training on; a
    // truncated file is refused and changes nothing.
    scenario("optimizer states: save, load, resume") {
      def job(w0: Array[Float]): KVStore = {
        val kv = KVStore.create("local")
        kv.setOptimizer("adam(learning_rate=0.01)")
        kv.init(0, NDArray.zeros(s23).set(w0))
        kv
      }
      def train(kv: KVStore, from: Int, to: Int): Unit =
        for (step <- from until to)
          kv.push(0, NDArray.zeros(s23).set(Array.tabulate(6)(i => math.sin((i + 1) * (step + 1)).toFloat)))
      def weights(kv: KVStore): Seq[Float] = { val o = NDArray.zeros(s23); kv.pull(0, o); o.toArray.toSeq }
      val file = java.nio.file.Files.createTempFile("kvstates", ".kvos")
      val w0 = Array[Float](1, 2, 3, 4, 5, 6)
      val whole = job(w0); train(whole, 0, 5)
      val first = job(w0); train(first, 0, 3)
      first.saveOptimizerStates(file.toString)
      val second = job(weights(first).toArray)
      second.loadOptimizerStates(file.toString)
      train(second, 3, 5)
      check("resumed weights bit-identical", weights(second) == weights(whole))
      val bytes = java.nio.file.Files.readAllBytes(file)
      java.nio.file.Files.write(file, bytes.take(bytes.length - 1))
      checkMessage("truncated file", expectThrows[KVInvalidArgumentException]("truncated file")(
        first.loadOptimizerStates(file.toString)), "truncated")
      train(first, 3, 5)
      check("a refused load changed nothing", weights(first) == weights(whole))
      java.nio.file.Files.delete(file)
      Seq(whole, first, second).foreach(_.dispose())
    }

    // 2bit, threshold 0.5, by hand: 0.6 sends +0.5, -0.7 sends -0.5; the residuals carry the rest.
    scenario("gradient compression") {
      val kv = KVStore.create("device")
      kv.setGradientCompression(Map("type" -> "2bit", "threshold" -> 0.5))
      kv.init(0, NDArray.zeros(s23))
      val g = Array[Float](0.3f, 0.6f, -0.7f, 0.1f, 0f, 0.25f)
      def pushPull(): Seq[Float] = { kv.push(0, NDArray.zeros(s23).set(g)); val o = NDArray.zeros(s23); kv.pull(0, o); o.toArray.toSeq }
      checkEq("first push", Seq[Float](0, 0.5f, -0.5f, 0, 0, 0), pushPull())
      checkEq("second push", Seq[Float](0.5f, 0.5f, -0.5f, 0, 0, 0.5f), pushPull())
      kv.setGradientCompression(Map("type" -> "none"))
      checkEq("off again", g.toSeq, pushPull())
      val local = KVStore.create("local")
      checkMessage("local store", expectThrows[KVNotSupportedException]("local store")(
        local.setGradientCompression(Map("type" -> "2bit"))), "local")
      Seq(kv, local).foreach(_.dispose())
    }

    scenario("isCapable and optimizer objects") {
      val kv = KVStore.create("local")
      check("local is capable of optimizers", kv.isCapable(KVStore.OPTIMIZER))
      checkMessage("unknown capability",
                   expectThrows[KVInvalidArgumentException]("unknown capability")(kv.isCapable("sparse")),
                   "sparse", "\"optimizer\"")
      checkEq("sgd spec", "sgd(learning_rate=0.5,momentum=0.25)",
              new SGD(learningRate = 0.5, momentum = 0.25f).spec)
      checkEq("defaults are not given", "adam", new Adam().spec)
      checkEq("rmsprop flag", "rmsprop(gamma1=0.8,centered=1)", new RMSProp(gamma1 = 0.8, centered = true).spec)
      checkEq("adagrad epsilon is its eps", "adagrad(eps=1.0E-6)", new AdaGrad(epsilon = 1e-6).spec)
      checkMessage("out of range at construction",
                   expectThrows[KVInvalidArgumentException]("momentum 2")(new NAG(momentum = 2)), "momentum")
      kv.init(3, NDArray.ones(s23))
      kv.setOptimizer(new Test(rescaleGrad = 2))
      kv.push(3, filled(3))
      val out = NDArray.zeros(s23)
      kv.pull(3, out = out)
      checkAll("test optimizer object ran", 7f, out)
      kv.setOptimizer(new SGD(learningRate = 0.5))
      kv.push(3, filled(2))
      kv.pull(3, out = out)
      checkAll("sgd object ran", 6f, out)
      kv.dispose()
    }

    // lazyUpdate (SGD and Adam only: NAG, AdaGrad, RMSProp and Test have no such argument,
    // so naming it there does not compile, as for any parameter a class does not have).
    scenario("optimizer objects: lazyUpdate and row_sparse pushes") {
      checkEq("lazyUpdate = false is given", "sgd(learning_rate=0.5,wd=0.1,lazy_update=0)",
              new SGD(learningRate = 0.5, wd = 0.1, lazyUpdate = false).spec)
      checkEq("lazyUpdate = true is the default", "sgd", new SGD(lazyUpdate = true).spec)
      checkEq("adam", "adam(beta1=0.8,lazy_update=0,multi_precision=1)",
              new Adam(beta1 = 0.8, multiPrecision = true, lazyUpdate = false).spec)
      // The 4x2 stored value after row_sparse pushes (row, gradient) to ones under opt.
      def afterPushes(opt: org.kvstore.scalaapi.Optimizer, pushes: (Long, Float)*): Seq[Float] = {
        val kv = KVStore.create("local")
        kv.init(0, NDArray.ones(Shape(4, 2)))
        kv.setOptimizer(opt)
        for ((row, g) <- pushes) kv.push(0, NDArray.rowSparseArray(Array(g, g), Array(row), Shape(4, 2)))
        val out = NDArray.zeros(Shape(4, 2))
        kv.pull(0, out)
        kv.dispose()
        out.toArray.toSeq
      }
      def checkClose(what: String, expected: Seq[Float], actual: Seq[Float]): Unit =
        check(s"$what (expected $expected, got $actual)",
              expected.size == actual.size && expected.zip(actual).forall { case (e, a) => math.abs(e - a) <= 1e-6f })
      // sgd(lr=0.5, wd=0.1), row 3 pushed with 1: 1 - 0.5*(1 + 0.1) = 0.45 there; a dense update
      // also decays the rows not pushed, 1 - 0.5*0.1 = 0.95.
      checkClose("lazy sgd with wd changes the pushed row only", Seq[Float](1, 1, 1, 1, 1, 1, 0.45f, 0.45f),
                 afterPushes(new SGD(learningRate = 0.5, wd = 0.1), 3L -> 1f))
      checkClose("dense sgd with wd decays every row", Seq[Float](0.95f, 0.95f, 0.95f, 0.95f, 0.95f, 0.95f, 0.45f, 0.45f),
                 afterPushes(new SGD(learningRate = 0.5, wd = 0.1, lazyUpdate = false), 3L -> 1f))
      // sgd(lr=0.5, momentum=0.9): row 1 pushed with 1 (momentum -0.5, w 0.5), then row 3: the
      // momentum carried over moves row 1 again (0.5 - 0.45 = 0.05) only in a dense update.
      checkClose("lazy sgd: momentum stays in its row", Seq[Float](1, 1, 0.5f, 0.5f, 1, 1, 0.5f, 0.5f),
                 afterPushes(new SGD(learningRate = 0.5, momentum = 0.9), 1L -> 1f, 3L -> 1f))
      checkClose("dense sgd: momentum carries over", Seq[Float](1, 1, 0.05f, 0.05f, 1, 1, 0.5f, 0.5f),
                 afterPushes(new SGD(learningRate = 0.5, momentum = 0.9, lazyUpdate = false), 1L -> 1f, 3L -> 1f))
      val adamLazy = afterPushes(new Adam(learningRate = 0.1, wd = 0.1), 3L -> 1f)
      val adamDense = afterPushes(new Adam(learningRate = 0.1, wd = 0.1, lazyUpdate = false), 3L -> 1f)
      checkEq("lazy adam leaves the rows not pushed", Seq.fill(6)(1f), adamLazy.take(6))
      check(s"dense adam decays them ($adamDense)", adamDense.take(6).forall(_ < 0.95f))
    }

    scenario("rows: at, apply, slice, update") {
      val a = NDArray.array(Array[Float](0, 1, 2, 3, 4, 5), Shape(3, 2))
      checkEq("a(1)", Seq(2f, 3f), a(1).toArray.toSeq)
      checkEq("at(-1)", Seq(4f, 5f), a.at(-1).toArray.toSeq)
      checkEq("slice(0, 2)", Seq(0f, 1f, 2f, 3f), a.slice(0, 2).toArray.toSeq)
      a(0) = 9f
      a(2) = NDArray.array(Array[Float](7, 8), Shape(2))
      checkEq("updates", Seq(9f, 9f, 2f, 3f, 7f, 8f), a.toArray.toSeq)
      expectThrows[IndexOutOfBoundsException]("a(3)")(a(3))
    }

    scenario("row_sparse: arrays, push, rowSparsePull") {
      val s62 = Shape(6, 2)
      val table = NDArray.array(Array.tabulate(12)(i => (10 * (i / 2) + i % 2).toFloat), s62)
      val g = NDArray.rowSparseArray(Array[Float](4, 4.5f, 1, 1.5f), Array(4L, 1L), s62)
      checkEq("stype", "row_sparse", g.stype)
      checkEq("ids sorted", Seq(1L, 4L), g.indices.toSeq)
      checkEq("rows move with their ids", Seq(1f, 1.5f, 4f, 4.5f), g.data.toArray.toSeq)
      checkEq("toArray: the logical contents", Seq[Float](0, 0, 1, 1.5f, 0, 0, 0, 0, 4, 4.5f, 0, 0),
              g.toArray.toSeq)
      checkEq("toDense", g.toArray.toSeq, g.toDense.toArray.toSeq)
      checkEq("dense to row_sparse", Seq(1L),
              NDArray.array(Array[Float](0, 0, 0, 2), Shape(2, 2)).tostype("row_sparse").indices.toSeq)
      val ns = expectThrows[KVNotSupportedException]("arithmetic on row_sparse")(g + 1f)
      checkEq("it carries the C code", Option(KVNotSupportedException.CODE), ns.map(_.getCode))
      expectThrows[KVNotSupportedException]("rows of row_sparse")(g(0))
      expectThrows[KVInvalidArgumentException]("a repeated id")(
        NDArray.rowSparseArray(Array[Float](1, 1, 2, 2), Array(3L, 3L), s62))
      for (strKeys <- Seq(false, true)) {
        val kv = KVStore.create("local")
        val h = NDArray.rowSparseArray(NDArray.array(Array[Float](1, 1, 2, 2), Shape(2, 2)), Array(5L, 4L), s62)
        val dense = NDArray.zeros(s62)
        val ids = NDArray.fromJava(org.kvstore.NDArray.create(Array(4L, 1L, 4L, 0L), org.kvstore.Shape.of(4),
                                                              org.kvstore.Context.cpu()))
        val o1 = NDArray.rowSparseZeros(s62)
        val o2 = NDArray.rowSparseZeros(s62)
        val bad = NDArray.rowSparseArray(Array[Float](1, 1), Array(0L), Shape(5, 2))
        val far = NDArray.fromJava(org.kvstore.NDArray.create(Array(1L, 6L), org.kvstore.Shape.of(2),
                                                              org.kvstore.Context.cpu()))
        if (strKeys) {
          kv.init("w", table); kv.push("w", Array(g, h)); kv.pull("w", dense)
          kv.rowSparsePull("w", Array(o1, o2), ids)
          expectThrows[KVShapeMismatchException]("push of another shape")(kv.push("w", bad))
          expectThrows[KVInvalidArgumentException]("a row id out of range")(kv.rowSparsePull("w", o1, far))
        } else {
          kv.init(7, table); kv.push(7, Array(g, h)); kv.pull(7, dense)
          kv.rowSparsePull(Array(7, 7), Array(o1, o2), Array(ids, ids))
          expectThrows[KVShapeMismatchException]("push of another shape")(kv.push(7, bad))
          expectThrows[KVInvalidArgumentException]("a row id out of range")(kv.rowSparsePull(7, o1, far))
        }
        val tag = if (strKeys) " (string key)" else " (int key)"
        checkEq("push sums by the union of rows" + tag, Seq[Float](0, 0, 1, 1.5f, 0, 0, 0, 0, 6, 6.5f, 1, 1),
                dense.toArray.toSeq)
        checkEq("rowSparsePull: unique sorted ids" + tag, Seq(0L, 1L, 4L), o1.indices.toSeq)
        checkEq("rowSparsePull: those rows" + tag, Seq[Float](0, 0, 1, 1.5f, 6, 6.5f), o1.data.toArray.toSeq)
        checkEq("both outputs" + tag, o1.data.toArray.toSeq, o2.data.toArray.toSeq)
        val after = NDArray.zeros(s62)
        if (strKeys) kv.pull("w", after) else kv.pull(7, after)
        checkEq("failed calls leave the stored value" + tag, dense.toArray.toSeq, after.toArray.toSeq)
        checkEq("and the output" + tag, Seq(0L, 1L, 4L), o1.indices.toSeq)
        kv.dispose()
      }
    }

    println(s"$passed passed, $failed failed")
    sys.exit(if (failed == 0) 0 else 1)
  }
}
