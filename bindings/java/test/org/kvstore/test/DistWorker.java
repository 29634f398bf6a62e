package org.kvstore.test;

import java.lang.ref.WeakReference;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import org.kvstore.KVNotSupportedException;
import org.kvstore.KVStore;
import org.kvstore.NDArray;
import org.kvstore.Shape;

/**
 * A worker of a real distributed job (started by kvstore-launch; see CMakeLists.txt beside
 * test/). A worker refuses updaters (they run on the servers): setUpdater and setStrUpdater
 * must throw KVNotSupportedException, and the registration the binding prepared must be
 * released exactly once by the binding itself, since the library never runs the free hook of
 * a refused registration: no released() call, no second DeleteGlobalRef (run under
 * -Xcheck:jni), no leaked global reference (the updater becomes collectable). The store must
 * work normally afterwards. Prints "PASS ..." and "N passed, N failed"; exits 1 on failure.
 */
public final class DistWorker {
  private static int passed;
  private static int failed;

  private DistWorker() {}

  private static void check(String what, boolean ok) {
    if (ok) {
      ++passed;
    } else {
      ++failed;
      System.out.println("FAIL: " + what);
    }
  }

  private static void settle() throws InterruptedException {
    for (int i = 0; i < 3; ++i) {
      System.gc();
      Thread.sleep(50);
    }
  }

  /**
   * Tries to register a new counting updater (a fresh object each time); returns a weak
   * reference to it, which clears once nothing (the binding's global reference included)
   * holds it.
   */
  private static WeakReference<Object> refusedRegistration(KVStore kv, boolean str,
      AtomicInteger released, AtomicInteger refused) {
    SummingUpdater u = new SummingUpdater(released);
    try {
      if (str) {
        kv.setStrUpdater(u);
      } else {
        kv.setUpdater(u);
      }
    } catch (KVNotSupportedException e) {
      refused.incrementAndGet();
    }
    return new WeakReference<>(u);
  }

  public static void main(String[] args) throws Exception {
    final int tries = 200;
    try (KVStore kv = KVStore.create("dist_sync")) {
      int rank = kv.rank();
      int workers = kv.numWorkers();

      AtomicInteger released = new AtomicInteger();
      AtomicInteger refused = new AtomicInteger();
      WeakReference<Object>[] probes = newRefs(2 * tries);
      for (int i = 0; i < tries; ++i) {
        probes[2 * i] = refusedRegistration(kv, false, released, refused);
        probes[2 * i + 1] = refusedRegistration(kv, true, released, refused);
      }
      check("every setUpdater/setStrUpdater on a worker throws KVNotSupportedException ("
          + refused.get() + " of " + 2 * tries + ")", refused.get() == 2 * tries);
      check("released() never runs for a refused registration (ran " + released.get() + " times)",
          released.get() == 0);
      for (int i = 0; i < 50 && alive(probes) > 0; ++i) settle();
      check("every refused updater is collectable: the binding deleted its global reference ("
          + alive(probes) + " still reachable)", alive(probes) == 0);
      check("a null updater is refused the same way", throwsNotSupported(() -> kv.setUpdater(null)));

      // The store is unaffected: a sync round sums every worker's push.
      Shape s = Shape.of(4);
      float[] mine = new float[4];
      Arrays.fill(mine, rank + 1);
      try (NDArray init = NDArray.zeros(s); NDArray v = NDArray.create(mine, s);
          NDArray out = NDArray.zeros(s)) {
        kv.init(7, init);
        kv.push(7, v);
        kv.pull(7, out);
        float want = workers * (workers + 1) / 2f;
        float[] got = out.toFloatArray();
        float[] expected = new float[4];
        Arrays.fill(expected, want);
        check("a sync round after the refusals sums every worker's push (want " + want + ", got "
            + Arrays.toString(got) + ")", Arrays.equals(expected, got));
      }
      if (failed == 0) System.out.println("PASS java dist worker " + rank + ": updaters refused");
    }
    System.out.println(passed + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }

  @SuppressWarnings("unchecked")
  private static WeakReference<Object>[] newRefs(int n) {
    return (WeakReference<Object>[]) new WeakReference<?>[n];
  }

  private static int alive(WeakReference<Object>[] refs) {
    int n = 0;
    for (WeakReference<Object> r : refs) {
      if (r.get() != null) ++n;
    }
    return n;
  }

  private static boolean throwsNotSupported(Runnable r) {
    try {
      r.run();
    } catch (KVNotSupportedException e) {
      return true;
    }
    return false;
  }
}
