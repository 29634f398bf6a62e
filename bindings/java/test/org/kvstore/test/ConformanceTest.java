package org.kvstore.test;

import java.io.IOException;
import java.lang.ref.Reference;
import java.lang.ref.WeakReference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.kvstore.Context;
import org.kvstore.DType;
import org.kvstore.Float16;
import org.kvstore.KVBusyException;
import org.kvstore.KVCallbackException;
import org.kvstore.KVDeviceException;
import org.kvstore.KVDtypeMismatchException;
import org.kvstore.KVDuplicateKeyException;
import org.kvstore.KVErrors;
import org.kvstore.KVInvalidArgumentException;
import org.kvstore.KVKeyKindMismatchException;
import org.kvstore.KVLibrary;
import org.kvstore.KVNotSupportedException;
import org.kvstore.KVNullPointerException;
import org.kvstore.KVShapeMismatchException;
import org.kvstore.KVStore;
import org.kvstore.KVStoreException;
import org.kvstore.KVUnknownKeyException;
import org.kvstore.NDArray;
import org.kvstore.Optimizer;
import org.kvstore.Shape;
import org.kvstore.StorageType;
import org.kvstore.StrUpdater;
import org.kvstore.Updater;
import org.kvstore.swig.ArrayHandle;
import org.kvstore.swig.KVErrorCode;
import org.kvstore.swig.KVStoreLib;
import org.kvstore.swig.StoreHandle;

/**
 * Java conformance suite: the seed tutorial's numbers and scenarios C1-C14 of
 * bindings/conformance/SCENARIOS.md. Ends with "N passed, N failed"; exits 1 on any failure.
 */
public final class ConformanceTest {
  private static int passed;
  private static int failed;
  private static final Shape S23 = Shape.of(2, 3);

  private ConformanceTest() {}

  // ------------------------------------------------------------------------------------------
  // A minimal harness

  @FunctionalInterface
  interface Body {
    void run() throws Exception;
  }

  private static void check(String what, boolean ok) {
    if (ok) {
      ++passed;
    } else {
      ++failed;
      System.out.println("FAIL: " + what);
    }
  }

  private static void checkEq(String what, Object expected, Object actual) {
    boolean ok = expected == null ? actual == null : expected.equals(actual);
    check(what + " (expected " + expected + ", got " + actual + ")", ok);
  }

  private static void checkValues(String what, float expected, NDArray a) {
    float[] v = a.toFloatArray();
    float[] want = new float[v.length];
    Arrays.fill(want, expected);
    check(what + " (expected all " + expected + ", got " + Arrays.toString(v) + ")",
        v.length > 0 && Arrays.equals(want, v));
  }

  private static <T extends Throwable> T expectThrows(String what, Class<T> cls, Body body) {
    try {
      body.run();
    } catch (Throwable t) {
      if (cls.isInstance(t)) {
        ++passed;
        return cls.cast(t);
      }
      ++failed;
      System.out.println("FAIL: " + what + ": expected " + cls.getSimpleName() + ", got " + t);
      return null;
    }
    ++failed;
    System.out.println("FAIL: " + what + ": expected " + cls.getSimpleName() + ", nothing thrown");
    return null;
  }

  private static void checkMessage(String what, Throwable t, String... parts) {
    if (t == null) return; // already counted as a failure
    String m = String.valueOf(t.getMessage());
    for (String p : parts) check(what + ": message \"" + m + "\" names " + p, m.contains(p));
  }

  /** Runs only the scenarios whose name contains this (the first argument), when given. */
  private static String only = "";

  private static void scenario(String name, Body body) {
    if (!name.contains(only)) return;
    System.out.println("== " + name);
    try {
      body.run();
    } catch (Throwable t) {
      ++failed;
      System.out.println("FAIL: " + name + " threw " + t);
      t.printStackTrace(System.out);
    }
  }

  private static NDArray filled(float v) {
    return NDArray.full(S23, v, DType.FLOAT32, Context.cpu());
  }

  // ------------------------------------------------------------------------------------------

  public static void main(String[] args) throws Exception {
    if (args.length > 0) only = args[0];
    scenario("C1 tutorial replay", ConformanceTest::c1Tutorial);
    scenario("C2 shape mismatch on push", ConformanceTest::c2ShapeMismatch);
    scenario("C3 dtype mismatch on push", ConformanceTest::c3DtypeMismatch);
    scenario("C4 unknown key on push and pull", ConformanceTest::c4UnknownKey);
    scenario("C5 duplicate init", ConformanceTest::c5DuplicateInit);
    scenario("C6 mixed key kinds", ConformanceTest::c6MixedKeys);
    scenario("C7 updater raises", ConformanceTest::c7UpdaterRaises);
    scenario("C7 updater raises on concurrent threads", ConformanceTest::c7Threads);
    scenario("C8 stateful updater", ConformanceTest::c8StatefulUpdater);
    scenario("C9 int and string keys", ConformanceTest::c9IntAndStringKeys);
    scenario("C10 lists", ConformanceTest::c10Lists);
    scenario("C10 lists: the direct push and pull keep the generated calls' errors", ConformanceTest::directCalls);
    scenario("C11 pushpull and broadcast", ConformanceTest::c11PushPullBroadcast);
    scenario("C12 dtypes", ConformanceTest::c12Dtypes);
    scenario("C13 type name", ConformanceTest::c13TypeName);
    scenario("C14 release: arrays", ConformanceTest::c14Arrays);
    scenario("C14 release: stores with updaters", ConformanceTest::c14Stores);
    scenario("C14 release: the free hook drops the updater", ConformanceTest::c14FreeHook);
    scenario("C7/C14 callbacks and free hooks on foreign native threads", ConformanceTest::foreignThreads);
    scenario("errors: one class per code", ConformanceTest::errorClasses);
    scenario("arrays: host data, NIO buffers, arithmetic, misuse", ConformanceTest::arrays);
    scenario("views keep the array's memory alive after close()", ConformanceTest::viewAfterClose);
    scenario("views keep the array's memory alive after the Cleaner ran", ConformanceTest::viewAfterCleaner);
    scenario("closing a store or an array during a call on it is refused (BUSY)", ConformanceTest::closeDuringCall);
    scenario("close racing calls on other threads", ConformanceTest::closeRacingCalls);
    scenario("optimizer states: save, load, resume bit-identically", ConformanceTest::optimizerStates);
    scenario("isCapable and optimizer objects", ConformanceTest::capabilitiesAndOptimizers);
    scenario("optimizer objects: lazyUpdate and row_sparse pushes", ConformanceTest::lazyUpdate);
    scenario("rows: row, rows, setRow", ConformanceTest::rowIndexing);
    scenario("row_sparse: arrays, push, rowSparsePull", ConformanceTest::rowSparse);
    scenario("gradient compression", ConformanceTest::gradientCompression);
    System.out.println(passed + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }

  // ------------------------------------------------------------------------------------------

  private static Context gpuOrCpu(int i) {
    return i < KVLibrary.gpuCount() ? Context.gpu(i) : Context.cpu(i);
  }

  private static final String STATES_SPEC = "adam(learning_rate=0.01,wd=0.001)";

  /** A store with the optimizer and key 0 initialised to {@code w0}, trained steps [from, to). */
  private static KVStore statesJob(float[] w0, int from, int to) {
    KVStore kv = KVStore.create("local");
    kv.setOptimizer(STATES_SPEC);
    try (NDArray w = NDArray.create(w0, S23)) {
      kv.init(0, w);
    }
    statesTrain(kv, from, to);
    return kv;
  }

  private static void statesTrain(KVStore kv, int from, int to) {
    for (int step = from; step < to; ++step) {
      float[] g = new float[6];
      for (int i = 0; i < 6; ++i) g[i] = (float) Math.sin((i + 1) * (step + 1));
      try (NDArray grad = NDArray.create(g, S23)) {
        kv.push(0, grad);
      }
    }
  }

  private static float[] statesWeights(KVStore kv) {
    try (NDArray out = NDArray.zeros(S23)) {
      kv.pull(0, out);
      return out.toFloatArray();
    }
  }

  static void optimizerStates() throws IOException {
    float[] w0 = {1, 2, 3, 4, 5, 6};
    java.nio.file.Path dir = Files.createTempDirectory("kvstates");
    java.nio.file.Path file = dir.resolve("states.kvos");
    try (KVStore whole = statesJob(w0, 0, 5); KVStore first = statesJob(w0, 0, 3)) {
      first.saveOptimizerStates(file);
      try (KVStore second = statesJob(statesWeights(first), 3, 3)) {
        second.loadOptimizerStates(file.toString());
        statesTrain(second, 3, 5);
        check("resumed weights bit-identical to the uninterrupted run",
            Arrays.equals(statesWeights(second), statesWeights(whole)));
      }
      // A truncated file is refused and changes nothing: the store trains on as before.
      byte[] bytes = Files.readAllBytes(file);
      java.nio.file.Path bad = dir.resolve("bad.kvos");
      Files.write(bad, Arrays.copyOf(bytes, bytes.length - 3));
      KVInvalidArgumentException e = expectThrows("truncated file", KVInvalidArgumentException.class,
          () -> first.loadOptimizerStates(bad));
      checkMessage("truncated file", e, "bad.kvos", "truncated");
      statesTrain(first, 3, 5);
      check("a refused load changed nothing", Arrays.equals(statesWeights(first), statesWeights(whole)));
      Files.delete(bad);
    } finally {
      Files.deleteIfExists(file);
      Files.delete(dir);
    }
    try (KVStore plain = KVStore.create("local")) {
      expectThrows("no optimizer", KVNotSupportedException.class,
          () -> plain.saveOptimizerStates(file));
    }
  }

  // 2bit, threshold 0.5, worked out by hand: r = g; 0.6 >= 0.5 sends +0.5, -0.7 <= -0.5 sends
  // -0.5; the next push adds g to the residuals (0.3, 0.1, -0.2, 0.1, ...).
  static void gradientCompression() {
    float[] g = {0.3f, 0.6f, -0.7f, 0.1f, 0f, 0.25f};
    try (KVStore kv = KVStore.create("device")) {
      java.util.Map<String, Object> params = new java.util.LinkedHashMap<>();
      params.put("type", "2bit");
      params.put("threshold", 0.5);
      kv.setGradientCompression(params);
      kv.init(0, NDArray.zeros(S23));
      float[][] want = {{0, 0.5f, -0.5f, 0, 0, 0}, {0.5f, 0.5f, -0.5f, 0, 0, 0.5f}};
      for (float[] w : want) {
        try (NDArray grad = NDArray.create(g, S23); NDArray out = NDArray.zeros(S23)) {
          kv.push(0, grad);
          kv.pull(0, out);
          check("2bit pull " + Arrays.toString(out.toFloatArray()), Arrays.equals(w, out.toFloatArray()));
        }
      }
      kv.setGradientCompression(java.util.Map.of("type", "none"));
      try (NDArray grad = NDArray.create(g, S23); NDArray out = NDArray.zeros(S23)) {
        kv.push(0, grad);
        kv.pull(0, out);
        check("off again: the push as it is", Arrays.equals(g, out.toFloatArray()));
      }
      KVInvalidArgumentException e = expectThrows("unknown type", KVInvalidArgumentException.class,
          () -> kv.setGradientCompression(java.util.Map.of("type", "3bit")));
      checkMessage("unknown type", e, "3bit");
    }
    try (KVStore local = KVStore.create("local")) {
      KVNotSupportedException e = expectThrows("local store", KVNotSupportedException.class,
          () -> local.setGradientCompression(java.util.Map.of("type", "2bit")));
      checkMessage("local store", e, "local");
    }
  }

  static void c1Tutorial() {
    try (KVStore kv = KVStore.create("local")) {
      Shape shape = Shape.of(2, 3);
      kv.init(3, NDArray.ones(shape).mul(2));
      NDArray a = NDArray.zeros(shape);
      kv.pull(3, a);
      checkValues("init then pull", 2f, a);

      kv.push(3, NDArray.ones(shape).mul(8));
      kv.pull(3, a);
      checkValues("push replaces (assign)", 8f, a);

      Context[] gpus = {gpuOrCpu(0), gpuOrCpu(1), gpuOrCpu(2), gpuOrCpu(3)};
      NDArray[] b = new NDArray[4];
      for (int i = 0; i < 4; ++i) b[i] = NDArray.ones(shape, gpus[i]);
      kv.push(3, b);
      kv.pull(3, a);
      checkValues("four pushed values are summed", 4f, a);

      List<Integer> calls = new ArrayList<>();
      kv.setUpdater((key, input, stored) -> {
        calls.add(key);
        stored.addInPlace(input.mul(2));
      });
      kv.pull(3, a);
      checkValues("setting an updater changes nothing", 4f, a);
      kv.push(3, NDArray.ones(shape));
      kv.pull(3, a);
      checkValues("updater stored += input * 2", 6f, a);
      checkEq("updater called once, for key 3", Arrays.asList(3), calls);

      for (int i = 0; i < 4; ++i) b[i] = NDArray.ones(shape, gpus[i]);
      kv.pull(3, b);
      for (int i = 0; i < 4; ++i) checkValues("pull into device " + i, 6f, b[i]);

      calls.clear();
      int[] keys = {5, 7, 9};
      NDArray[] ones = {NDArray.ones(shape), NDArray.ones(shape), NDArray.ones(shape)};
      kv.init(keys, ones);
      kv.push(keys, ones);
      checkEq("updater called for 5, 7, 9", Arrays.asList(5, 7, 9), calls);
      NDArray[] c = {NDArray.zeros(shape), NDArray.zeros(shape), NDArray.zeros(shape)};
      kv.pull(keys, c);
      for (int i = 0; i < 3; ++i) checkValues("list pull " + keys[i], 3f, c[i]);
    }
  }

  static void c2ShapeMismatch() {
    try (KVStore kv = KVStore.create("local"); NDArray wrong = NDArray.ones(Shape.of(3, 2));
        NDArray out = NDArray.zeros(S23)) {
      kv.init(3, filled(2));
      KVShapeMismatchException e =
          expectThrows("push (3,2) to a (2,3) key", KVShapeMismatchException.class, () -> kv.push(3, wrong));
      checkMessage("shape mismatch", e, "3", "(2,3)", "(3,2)");
      if (e != null) checkEq("code", -6, e.getCode());
      if (e != null) checkEq("code name", "KV_ERR_SHAPE_MISMATCH", e.getCodeName());
      kv.pull(3, out);
      checkValues("stored value unchanged", 2f, out);
      // A failing list push changes no key, not even the valid ones before it.
      kv.init(4, filled(1));
      expectThrows("list push with one bad shape", KVShapeMismatchException.class,
          () -> kv.push(new int[] {4, 3}, new NDArray[] {filled(9), wrong}));
      kv.pull(4, out);
      checkValues("valid key of the failed list push unchanged", 1f, out);
    }
  }

  static void c3DtypeMismatch() {
    try (KVStore kv = KVStore.create("local");
        NDArray wrong = NDArray.ones(S23, DType.FLOAT64);
        NDArray out = NDArray.zeros(S23)) {
      kv.init(3, filled(2));
      KVDtypeMismatchException e =
          expectThrows("push float64 to a float32 key", KVDtypeMismatchException.class, () -> kv.push(3, wrong));
      checkMessage("dtype mismatch", e, "3", "float32", "float64");
      kv.pull(3, out);
      checkValues("stored value unchanged", 2f, out);
    }
  }

  static void c4UnknownKey() {
    try (KVStore kv = KVStore.create("local"); NDArray out = filled(7)) {
      kv.init(3, filled(2));
      KVUnknownKeyException e =
          expectThrows("push to a key never initialised", KVUnknownKeyException.class, () -> kv.push(99, filled(1)));
      checkMessage("unknown key push", e, "99");
      e = expectThrows("pull of a key never initialised", KVUnknownKeyException.class, () -> kv.pull(99, out));
      checkMessage("unknown key pull", e, "99");
      checkValues("the pull output is not written", 7f, out);
      expectThrows("list pull with one unknown key", KVUnknownKeyException.class,
          () -> kv.pull(new int[] {3, 98}, new NDArray[] {out, filled(0)}));
      checkValues("no output of the failed list pull written", 7f, out);
    }
  }

  static void c5DuplicateInit() {
    try (KVStore kv = KVStore.create("local"); NDArray out = NDArray.zeros(S23)) {
      kv.init(3, filled(2));
      KVDuplicateKeyException e =
          expectThrows("second init of key 3", KVDuplicateKeyException.class, () -> kv.init(3, filled(5)));
      checkMessage("duplicate init", e, "3");
      kv.pull(3, out);
      checkValues("the first init's value is kept", 2f, out);
      expectThrows("a key repeated in one init", KVInvalidArgumentException.class,
          () -> kv.init(new int[] {4, 4}, new NDArray[] {filled(1), filled(1)}));
    }
  }

  static void c6MixedKeys() {
    try (KVStore kv = KVStore.create("local"); NDArray out = NDArray.zeros(S23)) {
      kv.init(3, filled(2));
      KVKeyKindMismatchException e = expectThrows("string key in an int-key store",
          KVKeyKindMismatchException.class, () -> kv.init("a", filled(1)));
      checkMessage("int store, string key", e, "a");
      expectThrows("string push in an int-key store", KVKeyKindMismatchException.class,
          () -> kv.push("3", filled(1)));
      kv.pull(3, out);
      checkValues("int store unchanged", 2f, out);
    }
    try (KVStore kv = KVStore.create("local"); NDArray out = NDArray.zeros(S23)) {
      kv.init("w", filled(4));
      KVKeyKindMismatchException e = expectThrows("int key in a string-key store",
          KVKeyKindMismatchException.class, () -> kv.push(3, filled(1)));
      checkMessage("string store, int key", e, "3");
      expectThrows("int pull in a string-key store", KVKeyKindMismatchException.class, () -> kv.pull(3, out));
      kv.pull("w", out);
      checkValues("string store unchanged", 4f, out);
    }
  }

  @SuppressWarnings("try") // kv.close() inside the try is the point of one check
  static void c7UpdaterRaises() {
    try (KVStore kv = KVStore.create("local"); NDArray out = NDArray.zeros(S23)) {
      kv.init(3, filled(2));
      IllegalStateException boom = new IllegalStateException("boom from the updater");
      kv.setUpdater((key, recv, stored) -> {
        stored.addInPlace(recv); // partial work: the library must roll it back
        throw boom;
      });
      IllegalStateException got =
          expectThrows("the updater's exception reaches push", IllegalStateException.class, () -> kv.push(3, filled(1)));
      check("it is the very exception the updater threw", got == boom);
      kv.pull(3, out);
      checkValues("stored value unchanged after the failed push", 2f, out);

      // An Error subclass is carried the same way.
      AssertionError err = new AssertionError("assertion in updater");
      kv.setUpdater((key, recv, stored) -> {
        throw err;
      });
      AssertionError gotErr = expectThrows("an Error from the updater", AssertionError.class, () -> kv.push(3, filled(1)));
      check("same Error instance", gotErr == err);

      // An updater that calls data functions of its own store gets the library's refusal.
      kv.setUpdater((key, recv, stored) -> kv.pull(3, out));
      expectThrows("re-entrant store call from the updater", KVInvalidArgumentException.class,
          () -> kv.push(3, filled(1)));

      // Closing the store from inside its own updater is refused with BUSY (it would free the
      // store in the middle of the push); the store stays usable.
      kv.setUpdater((key, recv, stored) -> kv.close());
      KVBusyException closing = expectThrows("close() from inside the store's updater",
          KVBusyException.class, () -> kv.push(3, filled(1)));
      checkMessage("close inside updater", closing, "KVStore", "updater", "stays usable");

      // A working updater afterwards: nothing stale is rethrown.
      kv.setUpdater((key, recv, stored) -> stored.addInPlace(recv));
      kv.push(3, filled(1));
      kv.pull(3, out);
      checkValues("a later push with a good updater works", 3f, out);

      // Borrowed arrays do not outlive the call.
      AtomicReference<NDArray> kept = new AtomicReference<>();
      kv.setUpdater((key, recv, stored) -> {
        kept.set(stored);
        stored.addInPlace(recv);
      });
      kv.push(3, filled(1));
      expectThrows("a borrowed array kept after the updater returned", IllegalStateException.class,
          () -> kept.get().toFloatArray());
    }
  }

  static void c7Threads() throws Exception {
    try (KVStore kv = KVStore.create("local")) {
      int nthreads = 4;
      for (int t = 0; t < nthreads; ++t) kv.init(t, filled(0));
      kv.setUpdater((key, recv, stored) -> {
        if (key == 2) throw new IllegalArgumentException("key 2 refuses");
        stored.addInPlace(recv);
      });
      int rounds = 200;
      AtomicInteger wrong = new AtomicInteger();
      AtomicInteger refused = new AtomicInteger();
      Thread[] threads = new Thread[nthreads];
      for (int t = 0; t < nthreads; ++t) {
        final int key = t;
        threads[t] = new Thread(() -> {
          for (int r = 0; r < rounds; ++r) {
            try (NDArray one = filled(1)) {
              kv.push(key, one);
              if (key == 2) wrong.incrementAndGet();
            } catch (IllegalArgumentException e) {
              if (key == 2 && e.getMessage().equals("key 2 refuses")) refused.incrementAndGet();
              else wrong.incrementAndGet();
            } catch (RuntimeException e) {
              wrong.incrementAndGet();
            }
          }
        });
        threads[t].start();
      }
      for (Thread th : threads) th.join();
      checkEq("each failing push on its own thread got its own exception", rounds, refused.get());
      checkEq("no exception leaked to another thread", 0, wrong.get());
      try (NDArray out = NDArray.zeros(S23)) {
        for (int t = 0; t < nthreads; ++t) {
          kv.pull(t, out);
          checkValues("key " + t + " after " + rounds + " pushes", t == 2 ? 0f : rounds, out);
        }
      }
    }
  }

  static void c8StatefulUpdater() {
    final class Counting implements Updater {
      final List<String> log = new ArrayList<>();
      final Map<Integer, Integer> perKey = new HashMap<>();

      @Override
      public void update(int key, NDArray recv, NDArray stored) {
        int n = perKey.merge(key, 1, Integer::sum);
        log.add(key + "#" + n);
        try (NDArray scaled = recv.mul(n)) {
          stored.addInPlace(scaled); // stored += n * recv, n = calls so far for this key
        }
      }
    }
    Counting u = new Counting();
    try (KVStore kv = KVStore.create("local"); NDArray out = NDArray.zeros(S23)) {
      kv.init(new int[] {1, 2}, new NDArray[] {filled(0), filled(100)});
      kv.setUpdater(u);
      kv.push(1, filled(1));
      kv.push(1, filled(1));
      kv.push(2, filled(1));
      kv.push(1, filled(1));
      kv.push(new int[] {2, 1}, new NDArray[] {filled(1), filled(1)});
      checkEq("call sequence", Arrays.asList("1#1", "1#2", "2#1", "1#3", "2#2", "1#4"), u.log);
      kv.pull(1, out);
      checkValues("key 1 = 1+2+3+4", 10f, out);
      kv.pull(2, out);
      checkValues("key 2 = 100+1+2", 103f, out);
    }
  }

  static void c9IntAndStringKeys() {
    try (KVStore kv = KVStore.create("local"); NDArray out = NDArray.zeros(S23)) {
      kv.init(new int[] {0, 1}, new NDArray[] {filled(1), filled(2)});
      kv.push(1, filled(5));
      kv.pull(1, out);
      checkValues("int key store", 5f, out);
    }
    try (KVStore kv = KVStore.create("local"); NDArray out = NDArray.zeros(S23)) {
      kv.init(new String[] {"weight", "bias"}, new NDArray[] {filled(1), filled(2)});
      List<String> seen = new ArrayList<>();
      StrUpdater su = (key, recv, stored) -> {
        seen.add(key);
        stored.addInPlace(recv);
      };
      kv.setStrUpdater(su);
      kv.push("bias", filled(3));
      kv.pull("bias", out);
      checkValues("string updater merged", 5f, out);
      checkEq("string updater receives the original key", Arrays.asList("bias"), seen);
      // Without a string updater, the int updater sees the internal id of a string key.
      kv.setStrUpdater(null);
      List<Integer> ids = new ArrayList<>();
      kv.setUpdater((key, recv, stored) -> {
        ids.add(key);
        stored.subInPlace(recv);
      });
      kv.push("weight", filled(1));
      kv.pull("weight", out);
      checkValues("int updater applied to a string key", 0f, out);
      checkEq("int updater called once", 1, ids.size());
    }
  }

  static void c10Lists() {
    try (KVStore kv = KVStore.create("local")) {
      kv.init(3, filled(0));
      kv.push(3, new NDArray[] {filled(1), filled(2), filled(3)});
      NDArray[] outs = {filled(-1), filled(-1), filled(-1)};
      kv.pull(3, outs);
      for (int i = 0; i < 3; ++i) checkValues("one key, three outputs: output " + i, 6f, outs[i]);
      kv.push(new int[] {3, 3}, new NDArray[] {filled(4), filled(5)});
      kv.pull(3, outs[0]);
      checkValues("a key repeated in the key list sums", 9f, outs[0]);

      int[] keys = {10, 11, 12};
      kv.init(keys, new NDArray[] {filled(1), filled(2), filled(3)});
      kv.push(keys, new NDArray[] {filled(10), filled(20), filled(30)});
      kv.pull(keys, outs);
      checkValues("list pull 10", 10f, outs[0]);
      checkValues("list pull 11", 20f, outs[1]);
      checkValues("list pull 12", 30f, outs[2]);
      expectThrows("keys and values of different lengths", KVInvalidArgumentException.class,
          () -> kv.push(keys, new NDArray[] {filled(1)}));
      expectThrows("a null value in a list", KVNullPointerException.class,
          () -> kv.push(keys, new NDArray[] {filled(1), null, filled(1)}));
      kv.pull(keys, outs);
      checkValues("rejected lists changed nothing", 10f, outs[0]);
    }
  }

  /**
   * KVStore's int-key push and pull go to KVStoreLibJNI.pushInts / pullInts / pushOne / pullOne
   * with the arrays' addresses; each error must be the one the generated KVStoreLib call gives
   * for the same arguments (class and message), and a refused call changes nothing.
   */
  static void directCalls() {
    try (KVStore kv = KVStore.create("local"); NDArray out = NDArray.zeros(S23)) {
      int[] keys = {1, 2, 3};
      kv.init(keys, new NDArray[] {filled(1), filled(2), filled(3)});
      StoreHandle h = kv.handle();
      NDArray one = filled(7);
      ArrayHandle[] oneHandle = {one.handle()};
      Body[][] pairs = {
        {() -> kv.push(keys, new NDArray[] {one}), () -> KVStoreLib.KVStorePush(h, keys, oneHandle, 0)},
        {() -> kv.pull(keys, new NDArray[] {one}), () -> KVStoreLib.KVStorePull(h, keys, oneHandle, 0)},
        {() -> kv.push((int[]) null, new NDArray[] {one}, 0), () -> KVStoreLib.KVStorePush(h, null, oneHandle, 0)},
        {() -> kv.pull((int[]) null, new NDArray[] {one}, 0), () -> KVStoreLib.KVStorePull(h, null, oneHandle, 0)},
        {() -> kv.push(new int[] {9}, new NDArray[] {one}), () -> KVStoreLib.KVStorePush(h, new int[] {9}, oneHandle, 0)},
        {() -> kv.pull(9, one), () -> KVStoreLib.KVStorePull(h, new int[] {9}, oneHandle, 0)},
        {() -> kv.push(9, one), () -> KVStoreLib.KVStorePush(h, new int[] {9}, oneHandle, 0)},
      };
      for (int i = 0; i < pairs.length; ++i) {
        Throwable direct = null;
        Throwable generated = null;
        try {
          pairs[i][0].run();
        } catch (Throwable t) {
          direct = t;
        }
        try {
          pairs[i][1].run();
        } catch (Throwable t) {
          generated = t;
        }
        check("case " + i + ": both calls fail (" + direct + " / " + generated + ")",
            direct != null && generated != null);
        if (direct != null && generated != null) {
          checkEq("case " + i + ": the exception's class", generated.getClass(), direct.getClass());
          checkEq("case " + i + ": the message", generated.getMessage(), direct.getMessage());
        }
      }
      kv.pull(keys, new NDArray[] {out, out, out});
      checkValues("refused calls changed nothing", 3f, out);
      NDArray closed = filled(1);
      closed.close();
      expectThrows("one-key push of a closed array", IllegalStateException.class, () -> kv.push(1, closed));
      expectThrows("list pull into a closed array", IllegalStateException.class,
          () -> kv.pull(keys, new NDArray[] {out, closed, out}));
      kv.push(2, one);
      kv.pull(2, out);
      checkValues("one-key push and pull", 7f, out);
      one.close();
    }
  }

  static void c11PushPullBroadcast() {
    try (KVStore kv = KVStore.create("local"); NDArray out = NDArray.zeros(S23)) {
      kv.init(3, filled(1));
      kv.setUpdater((key, recv, stored) -> stored.addInPlace(recv));
      kv.pushPull(3, filled(5), out);
      checkValues("pushpull returns the merged value", 6f, out);
      kv.pushPull(new int[] {3, 3}, new NDArray[] {filled(1), filled(1)}, new int[] {3}, new NDArray[] {out}, 0);
      checkValues("pushpull of two values", 8f, out);

      try (NDArray b = NDArray.zeros(S23)) {
        kv.broadcast(20, filled(7), b);
        checkValues("broadcast inits then pulls", 7f, b);
        KVDuplicateKeyException e = expectThrows("a second broadcast of the key", KVDuplicateKeyException.class,
            () -> kv.broadcast(20, filled(9), b));
        checkMessage("second broadcast", e, "20");
        kv.pull(20, b);
        checkValues("the first broadcast's value is kept", 7f, b);
      }
    }
    try (KVStore kv = KVStore.create("local"); NDArray out = NDArray.zeros(S23)) {
      kv.broadcast("s", filled(2), out);
      checkValues("string-key broadcast", 2f, out);
      kv.pushPull("s", filled(4), out);
      checkValues("string-key pushpull (assign)", 4f, out);
    }
  }

  static void c12Dtypes() {
    Shape s = Shape.of(4);
    try (KVStore kv = KVStore.create("local")) {
      // float32
      kv.init(0, NDArray.create(new float[] {1.5f, -2f, 3f, 0f}, s));
      kv.push(0, new NDArray[] {NDArray.create(new float[] {1f, 1f, 1f, 1f}, s), NDArray.create(new float[] {0.25f, 0f, 0f, 0f}, s)});
      NDArray o32 = NDArray.zeros(s, DType.FLOAT32);
      kv.pull(0, o32);
      check("float32 round trip", Arrays.equals(new float[] {1.25f, 1f, 1f, 1f}, o32.toFloatArray()));
      // float64
      kv.init(1, NDArray.create(new double[] {1e-300, 2, 3, 4}, s, Context.cpu()));
      kv.push(1, NDArray.create(new double[] {0.1, 0.2, 1e300, -4}, s, Context.cpu()));
      NDArray o64 = NDArray.zeros(s, DType.FLOAT64);
      kv.pull(1, o64);
      check("float64 round trip", Arrays.equals(new double[] {0.1, 0.2, 1e300, -4}, o64.toDoubleArray()));
      // float16 (bit patterns: 1.0 = 0x3C00, 2.0 = 0x4000, -0.5 = 0xB800)
      short one = 0x3C00;
      short two = 0x4000;
      short mhalf = (short) 0xB800;
      kv.init(2, NDArray.createFloat16(new short[] {one, one, one, one}, s, Context.cpu()));
      kv.push(2, new NDArray[] {NDArray.createFloat16(new short[] {one, one, mhalf, 0}, s, Context.cpu()),
          NDArray.createFloat16(new short[] {one, 0, 0, 0}, s, Context.cpu())});
      NDArray o16 = NDArray.zeros(s, DType.FLOAT16);
      kv.pull(2, o16);
      check("float16 round trip (sum 1+1=2)", Arrays.equals(new short[] {two, one, mhalf, 0}, o16.toFloat16Bits()));
      checkFloat16Conversion();
      // int32
      kv.init(3, NDArray.create(new int[] {0, 0, 0, 0}, s, Context.cpu()));
      kv.push(3, new NDArray[] {NDArray.create(new int[] {1, -2, 2147483600, 7}, s, Context.cpu()),
          NDArray.create(new int[] {1, 0, 47, 0}, s, Context.cpu())});
      NDArray oi = NDArray.zeros(s, DType.INT32);
      kv.pull(3, oi);
      check("int32 round trip", Arrays.equals(new int[] {2, -2, 2147483647, 7}, oi.toIntArray()));
      // int64
      kv.init(4, NDArray.create(new long[] {0, 0, 0, 0}, s, Context.cpu()));
      kv.push(4, NDArray.create(new long[] {1L << 40, -1, Long.MAX_VALUE, 3}, s, Context.cpu()));
      NDArray ol = NDArray.zeros(s, DType.INT64);
      kv.pull(4, ol);
      check("int64 round trip", Arrays.equals(new long[] {1L << 40, -1, Long.MAX_VALUE, 3}, ol.toLongArray()));
      // uint8
      kv.init(5, NDArray.create(new byte[] {0, 0, 0, 0}, s, Context.cpu()));
      kv.push(5, new NDArray[] {NDArray.create(new byte[] {(byte) 200, 1, 2, 3}, s, Context.cpu()),
          NDArray.create(new byte[] {(byte) 55, 1, 0, 0}, s, Context.cpu())});
      NDArray ou = NDArray.zeros(s, DType.UINT8);
      kv.pull(5, ou);
      byte[] u = ou.toByteArray();
      check("uint8 round trip (200+55=255)", Byte.toUnsignedInt(u[0]) == 255 && u[1] == 2 && u[2] == 2 && u[3] == 3);
      for (DType t : DType.values()) {
        try (NDArray z = NDArray.zeros(s, t)) {
          checkEq("dtype reported for " + t, t, z.dtype());
          checkEq("nbytes of " + t, 4L * t.size(), z.nbytes());
        }
      }
      expectThrows("float[] into an int32 array", KVDtypeMismatchException.class, () -> oi.copyFrom(new float[4]));
    }
  }

  static void capabilitiesAndOptimizers() {
    for (String type : new String[] {"local", "device", "local_allreduce_cpu"}) {
      try (KVStore kv = KVStore.create(type)) {
        check(type + " is capable of optimizers", kv.isCapable(KVStore.OPTIMIZER));
        check("capability names are case-insensitive", kv.isCapable("Optimizer"));
        KVInvalidArgumentException e = expectThrows("unknown capability",
            KVInvalidArgumentException.class, () -> kv.isCapable("row_sparse"));
        checkMessage("unknown capability", e, "row_sparse", "\"optimizer\"");
        expectThrows("null capability", KVNullPointerException.class, () -> kv.isCapable(null));
      }
    }
    checkEq("spec of sgd", "sgd(learning_rate=0.1,momentum=0.9,wd=1.0E-4)",
        Optimizer.sgd().learningRate(0.1).momentum(0.9).wd(1e-4).spec());
    checkEq("no parameters", "adam", Optimizer.adam().toString());
    checkEq("a parameter set again is replaced", "nag(momentum=0.5)",
        Optimizer.nag().momentum(0.9).momentum(0.5).spec());
    checkEq("rmsprop flags", "rmsprop(centered=1,gamma1=0.8)",
        Optimizer.rmsProp().centered(true).gamma1(0.8).spec());
    checkEq("generic set, equality by spec", Optimizer.adaGrad().set("eps", 1e-6),
        Optimizer.of("adagrad").set("eps", 1e-6));
    checkEq("objects are immutable", "sgd", sgdBase().spec());
    // Errors at the step that sets them, with the library's message.
    KVInvalidArgumentException e = expectThrows("adam has no momentum",
        KVInvalidArgumentException.class, () -> Optimizer.adam().momentum(0.9));
    checkMessage("unknown parameter", e, "momentum", "beta1");
    e = expectThrows("momentum out of range", KVInvalidArgumentException.class,
        () -> Optimizer.sgd().momentum(1.5));
    checkMessage("out of range", e, "momentum", "1.5");
    expectThrows("infinite learning rate", KVInvalidArgumentException.class,
        () -> Optimizer.sgd().learningRate(Double.POSITIVE_INFINITY));
    expectThrows("unknown optimizer", KVInvalidArgumentException.class, () -> Optimizer.of("adadelta"));
    expectThrows("null name", KVNullPointerException.class, () -> Optimizer.of(null));
    // An object updates exactly as its spec string does.
    float[][] results = new float[2][];
    for (int i = 0; i < 2; ++i) {
      try (KVStore kv = KVStore.create("local")) {
        kv.init(3, NDArray.ones(S23));
        if (i == 0) {
          kv.setOptimizer(Optimizer.sgd().learningRate(0.1).momentum(0.9).wd(0.01));
        } else {
          kv.setOptimizer("sgd(learning_rate=0.1,momentum=0.9,wd=0.01)");
        }
        for (float g : new float[] {1f, -2f, 0.5f}) kv.push(3, filled(g));
        NDArray out = NDArray.zeros(S23);
        kv.pull(3, out);
        results[i] = out.toFloatArray();
      }
    }
    check("object and spec string give the same weights", Arrays.equals(results[0], results[1]));
    check("the optimizer ran", results[0][0] != 1f);
    try (KVStore kv = KVStore.create("local")) {
      kv.init("w", NDArray.ones(S23));
      kv.setOptimizer(Optimizer.test().rescaleGrad(2));
      kv.push("w", filled(3f));
      NDArray out = NDArray.zeros(S23);
      kv.pull("w", out);
      checkValues("test optimizer object with string keys", 7f, out);
      expectThrows("null optimizer", KVNullPointerException.class, () -> kv.setOptimizer((Optimizer) null));
    }
  }

  /** The 4x2 stored value after row_sparse pushes (each {row, gradient}) to ones under opt. */
  private static float[] afterRowSparsePushes(Optimizer opt, float[][] pushes) {
    Shape s42 = Shape.of(4, 2);
    try (KVStore kv = KVStore.create("local")) {
      kv.init(0, NDArray.ones(s42));
      kv.setOptimizer(opt);
      for (float[] p : pushes) {
        kv.push(0, NDArray.rowSparse(new float[] {p[1], p[1]}, new long[] {(long) p[0]}, s42, Context.cpu()));
      }
      NDArray out = NDArray.zeros(s42);
      kv.pull(0, out);
      return out.toFloatArray();
    }
  }

  private static void checkClose(String what, float[] expected, float[] actual) {
    boolean ok = expected.length == actual.length;
    for (int i = 0; ok && i < expected.length; ++i) ok = Math.abs(expected[i] - actual[i]) <= 1e-6f;
    check(what + " (expected " + Arrays.toString(expected) + ", got " + Arrays.toString(actual) + ")", ok);
  }

  static void lazyUpdate() {
    checkEq("sgd lazyUpdate(false)", "sgd(learning_rate=0.5,lazy_update=0)",
        Optimizer.sgd().learningRate(0.5).lazyUpdate(false).spec());
    checkEq("adam lazyUpdate(true)", "adam(lazy_update=1,wd=0.1)",
        Optimizer.adam().lazyUpdate(true).wd(0.1).spec());
    checkEq("generic set", Optimizer.sgd().lazyUpdate(false), Optimizer.sgd().set("lazy_update", false));
    // Optimizers without a lazy path refuse it as they refuse any parameter they do not have.
    for (Optimizer o : new Optimizer[] {Optimizer.nag(), Optimizer.adaGrad(), Optimizer.rmsProp(), Optimizer.test()}) {
      KVInvalidArgumentException e = expectThrows(o.name() + " has no lazy_update",
          KVInvalidArgumentException.class, () -> o.lazyUpdate(false));
      checkMessage(o.name() + " refuses lazy_update", e, "lazy_update", o.name());
    }
    // sgd(lr=0.5, wd=0.1), row 3 pushed with 1: 1 - 0.5*(1 + 0.1) = 0.45 there; a dense update
    // also decays the rows not pushed, 1 - 0.5*0.1 = 0.95. The library's default is lazy.
    float[][] row3 = {{3, 1}};
    Optimizer sgdWd = Optimizer.sgd().learningRate(0.5).wd(0.1);
    float[] lazy = afterRowSparsePushes(sgdWd.lazyUpdate(true), row3);
    checkClose("lazy sgd with wd changes the pushed row only", new float[] {1, 1, 1, 1, 1, 1, 0.45f, 0.45f}, lazy);
    check("lazy is the default", Arrays.equals(lazy, afterRowSparsePushes(sgdWd, row3)));
    checkClose("dense sgd with wd decays every row", new float[] {0.95f, 0.95f, 0.95f, 0.95f, 0.95f, 0.95f, 0.45f, 0.45f},
        afterRowSparsePushes(sgdWd.lazyUpdate(false), row3));
    // sgd(lr=0.5, momentum=0.9): row 1 pushed with 1 (momentum -0.5, w 0.5), then row 3: the
    // momentum carried over moves row 1 again (0.5 - 0.45 = 0.05) only in a dense update.
    float[][] row1Then3 = {{1, 1}, {3, 1}};
    Optimizer sgdMom = Optimizer.sgd().learningRate(0.5).momentum(0.9);
    checkClose("lazy sgd: momentum stays in its row", new float[] {1, 1, 0.5f, 0.5f, 1, 1, 0.5f, 0.5f},
        afterRowSparsePushes(sgdMom.lazyUpdate(true), row1Then3));
    checkClose("dense sgd: momentum carries over", new float[] {1, 1, 0.05f, 0.05f, 1, 1, 0.5f, 0.5f},
        afterRowSparsePushes(sgdMom.lazyUpdate(false), row1Then3));
  }

  static void rowIndexing() {
    float[] data = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    try (NDArray a = NDArray.create(data, Shape.of(4, 3))) {
      NDArray r = a.row(1);
      checkEq("row shape", Shape.of(3), r.shape());
      check("row 1", Arrays.equals(new float[] {3, 4, 5}, r.toFloatArray()));
      r.fill(0);
      check("a row is a copy", a.toFloatArray()[3] == 3f);
      check("row -1", Arrays.equals(new float[] {9, 10, 11}, a.row(-1).toFloatArray()));
      NDArray rs = a.rows(1, 3);
      checkEq("rows shape", Shape.of(2, 3), rs.shape());
      check("rows 1..3", Arrays.equals(new float[] {3, 4, 5, 6, 7, 8}, rs.toFloatArray()));
      checkEq("rows clip as slices do", Shape.of(1, 3), a.rows(-1, 100).shape());
      checkEq("empty rows", Shape.of(0, 3), a.rows(3, 1).shape());
      a.setRow(0, 7);
      a.setRow(-2, NDArray.create(new float[] {1, 2, 3}, Shape.of(3)));
      check("setRow writes the rows", Arrays.equals(
          new float[] {7, 7, 7, 3, 4, 5, 1, 2, 3, 9, 10, 11}, a.toFloatArray()));
      float[] before = a.toFloatArray();
      expectThrows("row out of range", IndexOutOfBoundsException.class, () -> a.row(4));
      expectThrows("row -5", IndexOutOfBoundsException.class, () -> a.setRow(-5, 1));
      expectThrows("row of the wrong shape", KVShapeMismatchException.class,
          () -> a.setRow(0, NDArray.zeros(Shape.of(4))));
      expectThrows("row of the wrong dtype", KVDtypeMismatchException.class,
          () -> a.setRow(0, NDArray.zeros(Shape.of(3), DType.FLOAT64)));
      expectThrows("0-d array", IndexOutOfBoundsException.class,
          () -> NDArray.zeros(Shape.of()).row(0));
      check("failed row writes change nothing", Arrays.equals(before, a.toFloatArray()));
    }
    try (NDArray i = NDArray.zeros(Shape.of(2, 2), DType.INT32)) {
      i.setRow(1, 5);
      check("int32 rows", Arrays.equals(new int[] {0, 0, 5, 5}, i.toIntArray()));
      expectThrows("a value the dtype cannot hold", KVInvalidArgumentException.class,
          () -> i.setRow(0, 1e12));
    }
    // An updater's borrowed arrays have no zero-copy view: rows go through a copy and back.
    try (KVStore kv = KVStore.create("local")) {
      kv.init(1, NDArray.zeros(Shape.of(3, 2)));
      kv.setUpdater((key, input, stored) -> stored.setRow(key, input.row(key).mul(10)));
      kv.push(1, NDArray.ones(Shape.of(3, 2)));
      NDArray out = NDArray.zeros(Shape.of(3, 2));
      kv.pull(1, out);
      check("rows inside an updater", Arrays.equals(new float[] {0, 0, 10, 10, 0, 0}, out.toFloatArray()));
    }
  }

  /** A 6x2 float32 value whose row r holds (10r, 10r+1). */
  private static NDArray rspTable() {
    float[] v = new float[12];
    for (int i = 0; i < 12; ++i) v[i] = 10 * (i / 2) + i % 2;
    return NDArray.create(v, Shape.of(6, 2));
  }

  static void rowSparse() {
    Shape s62 = Shape.of(6, 2);
    // Round trip of data and ids: rows given for ids 4, 1 are stored sorted, each with its row.
    NDArray g = NDArray.rowSparse(new float[] {4, 4.5f, 1, 1.5f}, new long[] {4, 1}, s62, Context.cpu());
    checkEq("stype", StorageType.ROW_SPARSE, g.stype());
    checkEq("logical shape", s62, g.shape());
    check("ids sorted", Arrays.equals(new long[] {1, 4}, g.indices()));
    check("rows move with their ids", Arrays.equals(new float[] {1, 1.5f, 4, 4.5f}, g.data().toFloatArray()));
    check("toDense", Arrays.equals(new float[] {0, 0, 1, 1.5f, 0, 0, 0, 0, 4, 4.5f, 0, 0},
        g.toDense().toFloatArray()));
    check("toFloatArray gives the logical contents", Arrays.equals(g.toDense().toFloatArray(), g.toFloatArray()));
    NDArray fromDense = NDArray.create(new float[] {0, 0, 0, 2, 0, 0}, Shape.of(3, 2)).tostype("row_sparse");
    check("dense to row_sparse keeps the non-zero rows", Arrays.equals(new long[] {1}, fromDense.indices()));
    check("a copy stays row_sparse", g.copy().isRowSparse() && Arrays.equals(g.indices(), g.copy().indices()));
    expectThrows("a repeated id", KVInvalidArgumentException.class,
        () -> NDArray.rowSparse(new float[] {1, 1, 2, 2}, new long[] {3, 3}, s62, Context.cpu()));
    expectThrows("an id out of range", KVInvalidArgumentException.class,
        () -> NDArray.rowSparse(new float[] {1, 1}, new long[] {6}, s62, Context.cpu()));

    // Dense-only operations raise the library's NOT_SUPPORTED (never crash).
    KVNotSupportedException ns = expectThrows("arithmetic on row_sparse", KVNotSupportedException.class, () -> g.add(1));
    if (ns != null) checkEq("it carries the C code", KVErrorCode.KV_ERR_NOT_SUPPORTED, ns.getCode());
    expectThrows("fill on row_sparse", KVNotSupportedException.class, () -> g.fill(0));
    expectThrows("copyTo a dense array", KVNotSupportedException.class, () -> g.copyTo(NDArray.zeros(s62)));
    expectThrows("row of row_sparse", KVNotSupportedException.class, () -> g.row(0));
    expectThrows("zero-copy view of row_sparse", KVNotSupportedException.class, g::asByteBuffer);
    expectThrows("indices of a dense array", KVInvalidArgumentException.class, () -> NDArray.zeros(s62).indices());

    for (boolean strKeys : new boolean[] {false, true}) {
      String tag = strKeys ? " (string key)" : " (int key)";
      try (KVStore kv = KVStore.create("local")) {
        NDArray h = NDArray.rowSparse(new float[] {1, 1, 2, 2}, new long[] {5, 4}, s62, Context.cpu());
        NDArray dense = NDArray.zeros(s62);
        // Push with no updater: the sum by the union of rows, assigned densely.
        if (strKeys) {
          kv.init("w", rspTable());
          kv.push("w", new NDArray[] {g, h});
          kv.pull("w", dense);
        } else {
          kv.init(7, rspTable());
          kv.push(7, new NDArray[] {g, h});
          kv.pull(7, dense);
        }
        check("push sums by the union of rows" + tag, Arrays.equals(
            new float[] {0, 0, 1, 1.5f, 0, 0, 0, 0, 6, 6.5f, 1, 1}, dense.toFloatArray()));
        // rowSparsePull of unordered, repeated ids; one rowIds for two outputs.
        NDArray ids = NDArray.create(new long[] {4, 1, 4, 0}, Shape.of(4), Context.cpu());
        NDArray o1 = NDArray.rowSparseZeros(s62, DType.FLOAT32, Context.cpu());
        NDArray o2 = NDArray.rowSparseZeros(s62, DType.FLOAT32, Context.cpu());
        if (strKeys) kv.rowSparsePull("w", new NDArray[] {o1, o2}, ids);
        else kv.rowSparsePull(7, new NDArray[] {o1, o2}, ids);
        check("rowSparsePull: unique sorted ids" + tag, Arrays.equals(new long[] {0, 1, 4}, o1.indices()));
        check("rowSparsePull: those rows" + tag, Arrays.equals(new float[] {0, 0, 1, 1.5f, 6, 6.5f}, o1.data().toFloatArray()));
        check("one rowIds serves both outputs" + tag, Arrays.equals(o1.indices(), o2.indices())
            && Arrays.equals(o1.data().toFloatArray(), o2.data().toFloatArray()));
        // Errors leave the stored value and the outputs unchanged.
        NDArray bad = NDArray.rowSparse(new float[] {1, 1}, new long[] {0}, Shape.of(5, 2), Context.cpu());
        expectThrows("push of another shape" + tag, KVShapeMismatchException.class,
            () -> { if (strKeys) kv.push("w", bad); else kv.push(7, bad); });
        NDArray far = NDArray.create(new long[] {1, 6}, Shape.of(2), Context.cpu());
        expectThrows("a row id out of range" + tag, KVInvalidArgumentException.class,
            () -> { if (strKeys) kv.rowSparsePull("w", o1, far); else kv.rowSparsePull(7, o1, far); });
        expectThrows("a dense output" + tag, KVInvalidArgumentException.class,
            () -> { if (strKeys) kv.rowSparsePull("w", dense, ids); else kv.rowSparsePull(7, dense, ids); });
        checkMessage("lists of other lengths (the count-checking shim)",
            expectThrows("lists of other lengths" + tag, KVInvalidArgumentException.class,
                () -> KVStoreLib.KVStoreRowSparsePull(kv.handle(), new int[] {7, 7},
                    new ArrayHandle[] {o1.handle(), o2.handle()}, new ArrayHandle[] {ids.handle()}, 0)),
            "row_ids has 1 elements but keys has 2");
        NDArray after = NDArray.zeros(s62);
        if (strKeys) kv.pull("w", after); else kv.pull(7, after);
        check("failed calls leave the stored value" + tag, Arrays.equals(dense.toFloatArray(), after.toFloatArray()));
        check("a failed rowSparsePull leaves the output" + tag, Arrays.equals(new long[] {0, 1, 4}, o1.indices()));
      }
    }
    // A built-in optimizer updates the pushed rows of a dense stored value (sgd: lazily).
    try (KVStore kv = KVStore.create("local")) {
      kv.init(1, NDArray.ones(s62));
      kv.setOptimizer("sgd(learning_rate=1)");
      kv.push(1, g);
      NDArray w = NDArray.zeros(s62);
      kv.pull(1, w);
      check("sgd on row_sparse gradients", Arrays.equals(
          new float[] {1, 1, 0, -0.5f, 1, 1, 1, 1, -3, -3.5f, 1, 1}, w.toFloatArray()));
    }
    // A callback updater receives the sum as a row_sparse recv.
    try (KVStore kv = KVStore.create("local")) {
      kv.init(2, NDArray.ones(s62));
      AtomicReference<StorageType> seen = new AtomicReference<>();
      kv.setUpdater((key, recv, stored) -> {
        seen.set(recv.stype());
        try (NDArray d = recv.toDense()) {
          stored.addInPlace(d);
        }
      });
      kv.push(2, g);
      checkEq("the updater's recv is row_sparse", StorageType.ROW_SPARSE, seen.get());
      NDArray w = NDArray.zeros(s62);
      kv.pull(2, w);
      check("and merges it", w.toFloatArray()[2] == 2f && w.toFloatArray()[0] == 1f);
    }
  }

  private static Optimizer sgdBase() {
    Optimizer base = Optimizer.sgd();
    base.learningRate(0.5); // returns a new object; base is unchanged
    return base;
  }

  static void c13TypeName() {
    try (KVStore kv = KVStore.create("LoCaL")) {
      checkEq("type is the given name lowercased", "local", kv.type());
      checkEq("rank", 0, kv.rank());
      checkEq("num workers", 1, kv.numWorkers());
      kv.barrier();
    }
    try (KVStore kv = KVStore.create("Device")) {
      checkEq("device type", "device", kv.type());
    }
    KVInvalidArgumentException e =
        expectThrows("unknown store type", KVInvalidArgumentException.class, () -> KVStore.create("bogus_store"));
    checkMessage("unknown type", e, "bogus_store", "local", "device", "dist_sync");
    expectThrows("null store type", KVNullPointerException.class, () -> KVStore.create(null));
  }

  // ------------------------------------------------------------------------------------------

  private static long rssKb() throws IOException {
    for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
      if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
    }
    throw new IOException("no VmRSS in /proc/self/status");
  }

  private static void settle() throws InterruptedException {
    for (int i = 0; i < 3; ++i) {
      System.gc();
      Thread.sleep(50);
    }
  }

  static void c14Arrays() throws Exception {
    Shape s = Shape.of(256); // 1 KiB per array: 10^5 leaked arrays would be ~100 MiB
    for (int i = 0; i < 20_000; ++i) {
      try (NDArray a = NDArray.zeros(s)) {
        a.fill(i);
      }
    }
    settle();
    long before = rssKb();
    for (int i = 0; i < 100_000; ++i) {
      try (NDArray a = NDArray.zeros(s)) {
        a.fill(i);
      }
    }
    settle();
    long after = rssKb();
    long growthKb = after - before;
    System.out.println("   10^5 array create/close cycles: RSS " + before + " kB -> " + after + " kB");
    check("RSS growth " + growthKb + " kB below the 16 MiB bound", growthKb < 16 * 1024);

    // Arrays that are never closed are reclaimed by the Cleaner. How many unreachable arrays
    // pile up before a collection finds them depends on when the JVM collects, so they are
    // made in chunks of 2*10^4 with a collection after each: at most one chunk (~20 MiB) is
    // ever waiting for the Cleaner. The first round sets the process's peak (freed memory stays
    // in malloc's pools); a second round of the same size must reuse it, where a leak would
    // grow RSS by another ~100 MiB.
    makeUnclosedArrays(s, 100_000);
    long mid = rssKb();
    makeUnclosedArrays(s, 100_000);
    long end = rssKb();
    System.out.println("   10^5 unclosed arrays: RSS " + mid + " kB -> " + end + " kB");
    check("unclosed arrays reclaimed: growth " + (end - mid) + " kB below 32 MiB", end - mid < 32 * 1024);
  }

  private static void makeUnclosedArrays(Shape s, int count) throws InterruptedException {
    final int chunk = 20_000;
    for (int made = 0; made < count; made += chunk) {
      for (int i = 0; i < chunk; ++i) NDArray.zeros(s);
      settle();
    }
  }

  static void c14Stores() throws Exception {
    Shape s = Shape.of(1024);
    for (int i = 0; i < 200; ++i) storeCycle(s);
    settle();
    long before = rssKb();
    for (int i = 0; i < 1000; ++i) storeCycle(s);
    settle();
    long after = rssKb();
    System.out.println("   10^3 store cycles with an updater: RSS " + before + " kB -> " + after + " kB");
    check("RSS growth " + (after - before) + " kB below the 16 MiB bound", after - before < 16 * 1024);
  }

  private static void storeCycle(Shape s) {
    try (KVStore kv = KVStore.create("local"); NDArray v = NDArray.ones(s)) {
      kv.setUpdater((key, recv, stored) -> stored.addInPlace(recv));
      kv.init(1, v);
      kv.push(1, v);
    }
  }

  /** The store's free hook deletes the JNI global ref: the updater becomes collectable. */
  static void c14FreeHook() throws Exception {
    AtomicInteger released = new AtomicInteger();
    KVStore kv = KVStore.create("local");
    WeakReference<Updater> weak = registerUpdater(kv, released);
    settle();
    check("while registered, the store keeps the updater alive", weak.get() != null);
    checkEq("not released while registered", 0, released.get());

    kv.close();
    checkEq("released() ran once when the store was freed", 1, released.get());
    for (int i = 0; i < 50 && weak.get() != null; ++i) settle();
    check("after close the updater is collectable (global ref deleted)", weak.get() == null);

    // Replacing an updater releases the previous registration too.
    try (KVStore kv2 = KVStore.create("local")) {
      AtomicInteger r2 = new AtomicInteger();
      WeakReference<Updater> w2 = registerUpdater(kv2, r2);
      kv2.setUpdater(null);
      checkEq("released() ran when the updater was cleared", 1, r2.get());
      for (int i = 0; i < 50 && w2.get() != null; ++i) settle();
      check("a cleared updater is collectable", w2.get() == null);
    }
    expectThrows("a closed store refuses calls", IllegalStateException.class, () -> kv.type());
  }

  private static WeakReference<Updater> registerUpdater(KVStore kv, AtomicInteger released) {
    Updater u = new SummingUpdater(released);
    kv.setUpdater(u);
    return new WeakReference<>(u);
  }

  /**
   * The library calls the updater on the thread that called push. Here that thread is a native
   * one the JVM never saw: the trampoline must attach it (as "kvstore-callback"), run the
   * updater, detach it, and turn an exception into the callback error code. The free hook
   * must also work there.
   */
  static void foreignThreads() throws Exception {
    try (KVStore kv = KVStore.create("local"); NDArray one = filled(1); NDArray out = NDArray.zeros(S23)) {
      kv.init(5, filled(1));
      List<String> threads = java.util.Collections.synchronizedList(new ArrayList<>());
      kv.setUpdater((key, recv, stored) -> {
        threads.add(Thread.currentThread().getName());
        stored.addInPlace(recv);
      });
      int bad = 0;
      for (int i = 0; i < 100; ++i) {
        if (NativeThreads.push(kv.handle().address(), 5, one.handle().address()) != 0) ++bad;
      }
      checkEq("100 pushes from foreign threads succeed", 0, bad);
      kv.pull(5, out);
      checkValues("each foreign-thread push ran the Java updater", 101f, out);
      checkEq("the updater ran 100 times", 100, threads.size());
      check("always on an attached foreign thread named kvstore-callback",
          threads.stream().allMatch("kvstore-callback"::equals));

      kv.setUpdater((key, recv, stored) -> {
        stored.addInPlace(recv);
        throw new IllegalStateException("thrown on a foreign thread");
      });
      checkEq("an exception on a foreign thread fails the push with KV_ERR_CALLBACK",
          KVErrorCode.KV_ERR_CALLBACK, NativeThreads.push(kv.handle().address(), 5, one.handle().address()));
      kv.pull(5, out);
      checkValues("unchanged after the failed foreign push", 101f, out);
      kv.setUpdater(null);
      kv.push(5, one);
      kv.pull(5, out);
      checkValues("nothing stale is rethrown on the Java thread afterwards", 1f, out);
    }

    StoreHandle[] store = new StoreHandle[1];
    KVStoreLib.KVStoreCreate("local", store);
    AtomicInteger released = new AtomicInteger();
    WeakReference<KVStoreLib.Updater> weak = registerRaw(store[0], released);
    checkEq("KVStoreFree on a foreign thread", 0, NativeThreads.free(store[0].address()));
    checkEq("the free hook ran release() on the foreign thread", 1, released.get());
    for (int i = 0; i < 50 && weak.get() != null; ++i) settle();
    check("and deleted the global ref there", weak.get() == null);
  }

  private static WeakReference<KVStoreLib.Updater> registerRaw(StoreHandle store, AtomicInteger released) {
    KVStoreLib.Updater u = new KVStoreLib.Updater() {
      @Override
      public void update(int key, ArrayHandle recv, ArrayHandle stored) {}

      @Override
      public void release() {
        released.incrementAndGet();
      }
    };
    KVStoreLib.KVStoreSetUpdater(store, u);
    return new WeakReference<>(u);
  }

  // ------------------------------------------------------------------------------------------

  static void errorClasses() {
    int[] codes = KVErrors.codes();
    // The table is -1, -2, ... with no gap; the library knows no code past its end.
    for (int i = 0; i < codes.length; ++i) checkEq("code " + i + " of the table", -(i + 1), codes[i]);
    checkEq("the library's table ends where the Java one does", "KV_ERR_UNKNOWN",
        KVLibrary.errorName(-(codes.length + 1)));
    check("KV_ERR_BUSY maps to KVBusyException",
        KVErrors.create(KVErrorCode.KV_ERR_BUSY, "x") instanceof KVBusyException);
    java.util.Set<Class<?>> classes = new java.util.HashSet<>();
    for (int code : codes) {
      KVStoreException e = KVErrors.create(code, "m");
      checkEq("code kept for " + code, code, e.getCode());
      checkEq("name matches the C table for " + code, KVLibrary.errorName(code), e.getCodeName());
      check("a subclass, not the base, for " + code, e.getClass() != KVStoreException.class);
      classes.add(e.getClass());
    }
    checkEq("one distinct class per code", codes.length, classes.size());
    check("callback code maps to KVCallbackException", KVErrors.create(-17, "x") instanceof KVCallbackException);
    checkEq("unknown code gives the base class", KVStoreException.class, KVErrors.create(-999, "x").getClass());
  }

  static void arrays() {
    try (NDArray a = NDArray.zeros(S23)) {
      FloatBuffer view = a.asFloatBuffer();
      view.put(0, 5f).put(5, 6f);
      float[] v = a.toFloatArray();
      check("writes through the zero-copy view land in the array", v[0] == 5f && v[5] == 6f);
      a.fill(2);
      check("the view sees later writes", view.get(3) == 2f);

      ByteBuffer direct = ByteBuffer.allocateDirect(24).order(ByteOrder.nativeOrder());
      FloatBuffer fb = direct.asFloatBuffer();
      for (int i = 0; i < 6; ++i) fb.put(i, i);
      a.copyFrom(fb);
      check("copy in from a direct FloatBuffer", Arrays.equals(new float[] {0, 1, 2, 3, 4, 5}, a.toFloatArray()));
      ByteBuffer back = ByteBuffer.allocateDirect(24).order(ByteOrder.nativeOrder());
      a.copyTo(back);
      check("copy out to a direct ByteBuffer", back.getFloat(20) == 5f);
      expectThrows("a heap buffer is refused", KVInvalidArgumentException.class,
          () -> a.copyFrom(FloatBuffer.allocate(6)));
      expectThrows("a direct buffer of the wrong size", KVInvalidArgumentException.class,
          () -> a.copyFrom(ByteBuffer.allocateDirect(8)));
      expectThrows("a float[] of the wrong length", KVInvalidArgumentException.class, () -> a.copyFrom(new float[5]));

      try (NDArray b = NDArray.create(new float[] {1, 2, 3, 4, 5, 6}, S23);
          NDArray sum = a.add(b); NDArray diff = b.sub(1); NDArray prod = b.mul(b); NDArray q = b.div(2)) {
        check("add", Arrays.equals(new float[] {1, 3, 5, 7, 9, 11}, sum.toFloatArray()));
        check("sub scalar", Arrays.equals(new float[] {0, 1, 2, 3, 4, 5}, diff.toFloatArray()));
        check("mul", Arrays.equals(new float[] {1, 4, 9, 16, 25, 36}, prod.toFloatArray()));
        check("div scalar", Arrays.equals(new float[] {0.5f, 1, 1.5f, 2, 2.5f, 3}, q.toFloatArray()));
        b.divInPlace(b).mulInPlace(3).subInPlace(1);
        checkValues("in-place chain", 2f, b);
        try (NDArray copy = b.copy()) {
          checkValues("copy", 2f, copy);
          checkEq("copy keeps the shape", S23, copy.shape());
        }
        expectThrows("add of different shapes", KVShapeMismatchException.class,
            () -> b.add(NDArray.zeros(Shape.of(6))));
        expectThrows("int32 division by zero", KVInvalidArgumentException.class,
            () -> NDArray.create(new int[] {1, 2}, Shape.of(2), Context.cpu()).div(0));
      }
    }
    NDArray closed = NDArray.zeros(S23);
    closed.close();
    closed.close(); // idempotent
    check("isClosed", closed.isClosed());
    expectThrows("use after close", IllegalStateException.class, () -> closed.toFloatArray());
    if (KVLibrary.gpuCount() == 0) {
      KVDeviceException e = expectThrows("a GPU array without a GPU", KVDeviceException.class,
          () -> NDArray.zeros(S23, Context.gpu(0)));
      checkMessage("no GPU", e, "gpu");
    }
    expectThrows("negative dimension", KVInvalidArgumentException.class, () -> Shape.of(2, -1));
    checkEq("scalar shape", 1L, Shape.of().size());
    try (NDArray scalar = NDArray.full(Shape.of(), 4, DType.FLOAT32, Context.cpu())) {
      check("rank-0 array", scalar.shape().ndim() == 0 && scalar.toFloatArray()[0] == 4f);
    }
    // The raw SWIG layer throws too, and its holders are checked.
    expectThrows("raw layer: null handle", KVNullPointerException.class,
        () -> KVStoreLib.KVArrayFill(null, 1.0));
    expectThrows("raw layer: empty holder", KVInvalidArgumentException.class,
        () -> KVStoreLib.KVArrayCreate(new long[] {2}, 0, 1, 0, new ArrayHandle[0]));
    check("version", KVLibrary.version() == 100 && "0.1.0".equals(KVLibrary.versionString()));
  }

  // ------------------------------------------------------------------------------------------
  // Issue 10, defect 2: a zero-copy view must keep the array's memory alive.
  //
  // 64 MiB arrays: glibc serves them with mmap and returns them with munmap, so a view over
  // freed memory faults at once (a JVM crash) instead of reading stale bytes, and RSS shows
  // whether the memory was returned once the last view is gone.

  private static final Shape BIG = Shape.of(16 << 20); // 16 Mi float32 = 64 MiB
  private static final long BIG_KB = 64 << 10;

  /** Writes i*0.5 at every 4096th element through the view; checks it reads back. */
  private static boolean patternHolds(FloatBuffer v, boolean write) {
    for (int i = 0; i < v.capacity(); i += 4096) {
      if (write) v.put(i, i * 0.5f);
      if (v.get(i) != i * 0.5f) return false;
    }
    return true;
  }

  /** Makes and fills arrays of the same size, which reuse freed memory if any was freed. */
  private static void churn() {
    for (int i = 0; i < 3; ++i) {
      NDArray.full(BIG, -7, DType.FLOAT32, Context.cpu()).close(); // fill touches every page
    }
  }

  static void viewAfterClose() throws Exception {
    settle();
    long before = rssKb();
    NDArray a = NDArray.zeros(BIG);
    FloatBuffer view = a.asFloatBuffer();
    FloatBuffer slice = a.asByteBuffer().slice().order(ByteOrder.nativeOrder()).asFloatBuffer();
    check("pattern written through the view", patternHolds(view, true));
    a.close();
    check("the array reports closed", a.isClosed());
    expectThrows("the closed array refuses calls", IllegalStateException.class, () -> a.toFloatArray());
    expectThrows("and refuses new views", IllegalStateException.class, () -> a.asFloatBuffer());
    churn();
    check("after close() the view still reads its memory", patternHolds(view, false));
    check("and writes to it", patternHolds(view, true));
    check("a derived view (slice) reads the same memory", patternHolds(slice, false));
    long withView = rssKb();
    view = null;
    slice = null;
    for (int i = 0; i < 50 && rssKb() - before > BIG_KB / 2; ++i) settle();
    long after = rssKb();
    System.out.println("   64 MiB array closed with views: RSS " + before + " kB -> " + withView
        + " kB (views alive) -> " + after + " kB (views collected)");
    check("the memory stayed mapped while the views lived", withView - before > BIG_KB / 2);
    check("the last view's collection freed it (RSS growth " + (after - before) + " kB)",
        after - before < BIG_KB / 2);
  }

  /** A view of a new array, whose NDArray is unreachable once this returns. */
  private static FloatBuffer orphanView(List<WeakReference<NDArray>> owner) {
    NDArray a = NDArray.zeros(BIG);
    owner.add(new WeakReference<>(a));
    FloatBuffer v = a.asFloatBuffer();
    patternHolds(v, true);
    return v;
  }

  static void viewAfterCleaner() throws Exception {
    List<WeakReference<NDArray>> owner = new ArrayList<>();
    FloatBuffer view = orphanView(owner);
    for (int i = 0; i < 50 && owner.get(0).get() != null; ++i) settle();
    check("the NDArray itself was collected", owner.get(0).get() == null);
    settle(); // its Cleaner has run by now
    churn();
    check("after the NDArray's Cleaner ran, the view still reads its memory", patternHolds(view, false));
    check("and writes to it", patternHolds(view, true));
    Reference.reachabilityFence(view);

    // Borrowed updater arguments have no view: the store owns that memory.
    try (KVStore kv = KVStore.create("local"); NDArray one = filled(1)) {
      kv.init(1, filled(1));
      AtomicReference<Throwable> thrown = new AtomicReference<>();
      kv.setUpdater((key, recv, stored) -> {
        try {
          stored.asFloatBuffer();
        } catch (Throwable t) {
          thrown.set(t);
        }
        stored.addInPlace(recv);
      });
      kv.push(1, one);
      check("asFloatBuffer() of a borrowed updater argument throws IllegalStateException, got "
          + thrown.get(), thrown.get() instanceof IllegalStateException);
    }
  }

  // ------------------------------------------------------------------------------------------
  // Issue 10, defect 3: closing a store or an array while a call on it runs throws BUSY and
  // frees nothing; the handle stays usable.

  static void closeDuringCall() throws Exception {
    try (KVStore kv = KVStore.create("local"); NDArray v = filled(1); NDArray out = NDArray.zeros(S23)) {
      kv.init(3, filled(2));
      java.util.concurrent.CountDownLatch entered = new java.util.concurrent.CountDownLatch(1);
      java.util.concurrent.CountDownLatch proceed = new java.util.concurrent.CountDownLatch(1);
      kv.setUpdater((key, recv, stored) -> {
        entered.countDown();
        try {
          proceed.await();
        } catch (InterruptedException e) {
          throw new IllegalStateException(e);
        }
        stored.addInPlace(recv);
      });
      AtomicReference<Throwable> pushError = new AtomicReference<>();
      Thread pusher = new Thread(() -> {
        try {
          kv.pushPull(3, v, out);
        } catch (Throwable t) {
          pushError.set(t);
        }
      });
      pusher.start();
      entered.await();
      KVBusyException e = expectThrows("close() of the store while another thread's push runs its updater",
          KVBusyException.class, kv::close);
      checkMessage("store busy", e, "KVStore", "in use", "stays usable");
      if (e != null) checkEq("the code is KV_ERR_BUSY", KVErrorCode.KV_ERR_BUSY, e.getCode());
      expectThrows("close() of the pushed array meanwhile", KVBusyException.class, v::close);
      expectThrows("close() of the pushpull output meanwhile", KVBusyException.class, out::close);
      checkEq("the store answers other calls meanwhile", "local", kv.type());
      proceed.countDown();
      pusher.join(10_000);
      check("the push finished", !pusher.isAlive());
      checkEq("and succeeded", null, pushError.get());
      checkValues("with the pushed value merged", 3f, out);
      check("the refused closes left the array open", !v.isClosed() && !out.isClosed());
      kv.setUpdater(null);
      kv.push(3, v);
      kv.pull(3, out);
      checkValues("the store is usable after the refused close", 1f, out);
    }

    // Once the call returned, close works, and a second close does nothing.
    KVStore kv = KVStore.create("local");
    kv.setUpdater((key, recv, stored) -> kv.close());
    kv.init(1, filled(1));
    expectThrows("close() from the updater", KVBusyException.class, () -> kv.push(1, filled(1)));
    kv.setUpdater(null);
    kv.close();
    kv.close();
    expectThrows("a closed store refuses calls", IllegalStateException.class, kv::type);
  }

  /**
   * One thread calls, another closes: each close either succeeds (the caller then sees
   * IllegalStateException) or throws BUSY (the call it raced then finishes normally). The
   * library alone cannot order these: the call may not have entered it yet when close runs.
   */
  static void closeRacingCalls() throws Exception {
    int rounds = 2000;
    int busy = 0;
    int refused = 0;
    AtomicInteger wrong = new AtomicInteger();
    for (int r = 0; r < rounds; ++r) {
      NDArray a = NDArray.zeros(Shape.of(64));
      KVStore kv = KVStore.create("local");
      java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
      AtomicInteger calls = new AtomicInteger();
      Thread caller = new Thread(() -> {
        go.countDown();
        try {
          for (int i = 0; ; ++i) {
            a.fill(i);
            kv.rank();
            calls.incrementAndGet();
          }
        } catch (IllegalStateException e) {
          // closed under us: the expected end
        } catch (Throwable t) {
          wrong.incrementAndGet();
          System.out.println("   racing caller got " + t);
        }
      });
      caller.start();
      go.await();
      for (int spin = r % 50; spin > 0; --spin) Thread.onSpinWait();
      for (AutoCloseable c : new AutoCloseable[] {a, kv}) {
        for (;;) {
          try {
            c.close();
            break;
          } catch (KVBusyException e) {
            ++busy;
            Thread.yield();
          }
        }
      }
      caller.join();
      ++refused;
    }
    System.out.println("   " + rounds + " races: " + busy + " closes refused with BUSY, " + refused
        + " callers stopped by the close");
    checkEq("no racing call saw anything but IllegalStateException", 0, wrong.get());
  }

  /** Float16 (the JVM bindings' one binary16 conversion) and the library-derived DType table. */
  static void checkFloat16Conversion() {
    boolean exact = true;
    for (int b = 0; b < 0x10000; ++b) {
      float f = Float16.toFloat((short) b);
      boolean nan = ((b >>> 10) & 0x1f) == 31 && (b & 0x3ff) != 0;
      if (nan ? !Float.isNaN(f) || !Float.isNaN(Float16.toFloat(Float16.fromFloat(f)))
              : Float16.fromFloat(f) != (short) b) {
        exact = false;
      }
    }
    check("float16 -> float -> float16 is exact for all 65536 patterns", exact);
    check("float16 values", Float16.toFloat((short) 0x3C00) == 1f && Float16.toFloat((short) 0xB800) == -0.5f
        && Float16.toFloat((short) 0x0001) == 0x1p-24f && Float16.toFloat((short) 0x7C00) == Float.POSITIVE_INFINITY);
    check("float -> float16 rounds to nearest even", Float16.fromFloat(1f + 0x1p-11f) == 0x3C00
        && Float16.fromFloat(1f + 3 * 0x1p-11f) == 0x3C02 && Float16.fromFloat(0x1p-25f) == 0
        && Float16.fromFloat(0x1.8p-25f) == 1 && Float16.fromFloat(65520f) == 0x7C00
        && Float16.fromFloat(-65504f) == (short) 0xFBFF);
    boolean table = true;
    for (int code = 0; code < 16; ++code) {
      String name = KVStoreLib.KVDTypeName(code);
      DType t = null;
      for (DType d : DType.values()) if (d.code() == code) t = d;
      if (name == null ? t != null : t == null || !name.equals(t.toString()) || t.size() != KVStoreLib.KVDTypeSize(code)) {
        table = false;
      }
    }
    check("DType is the library's dtype table (KVDTypeName, KVDTypeSize)", table);
  }
}
