package org.kvstore;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.util.Arrays;
import java.util.function.BiConsumer;
import org.kvstore.swig.ArrayHandle;
import org.kvstore.swig.KVStoreLib;
import org.kvstore.swig.KVStoreLibJNI;
import org.kvstore.swig.StoreHandle;

/**
 * A key-value store for data-parallel training: {@code init} named arrays, {@code push} values
 * (several values for one key are summed, then merged by the updater; default: assign),
 * {@code pull} the stored value into one or many outputs.
 *
 * <p>A store uses int keys or String keys, fixed by the first call that names a key. Every
 * failure throws the {@link KVStoreException} subclass of its C error code, with the library's
 * message, and leaves the store as it was. {@link #close()} releases the store (a Cleaner does it
 * for an unreachable store that was never closed).
 *
 * <p>Every native call runs through one helper ({@code call}, or its direct twins for the hot
 * push and pull) that enters the store and every array it is given for the whole call and
 * fences them until it returned, so that closing any of them meanwhile (another thread, or the store's own updater) throws {@link KVBusyException}
 * instead of freeing memory in use, and the Cleaner never frees one mid-call.
 */
public final class KVStore implements AutoCloseable {
  private static final Cleaner CLEANER = Cleaner.create();

  /** Node groups for {@link #numDeadNode}. */
  public static final int GROUP_NODE_SCHEDULER = 1;
  public static final int GROUP_NODE_SERVER = 2;
  public static final int GROUP_NODE_WORKER = 4;

  private final Lifetime<StoreHandle> life;
  private final Cleaner.Cleanable cleanable;

  private KVStore(StoreHandle handle) {
    this.life = new Lifetime<>(handle, KVStore::free, "KVStore", "KVStore is closed");
    this.cleanable = CLEANER.register(this, life::closeQuietly);
  }

  /** KVStoreFree; the handle is dead afterwards unless the library refused (BUSY). */
  private static void free(StoreHandle handle) {
    try {
      KVStoreLib.KVStoreFree(handle);
    } catch (KVBusyException e) {
      throw e; // nothing was freed: the handle stays valid
    } catch (RuntimeException e) {
      handle.delete(); // released anyway (a failed exit barrier)
      throw e;
    }
    handle.delete();
  }

  /** Creates a store of the given type ("local", "device", "nccl", "dist_sync", ...). */
  public static KVStore create(String type) {
    if (type == null) throw new KVNullPointerException("store type is null");
    StoreHandle[] out = new StoreHandle[1];
    KVStoreLib.KVStoreCreate(type, out);
    return new KVStore(out[0]);
  }

  /** Creates a "local" store. */
  public static KVStore create() {
    return create("local");
  }

  /**
   * The native handle (for the org.kvstore.swig layer); throws if closed. A raw call made with
   * it is not counted as in use: keep this KVStore open and reachable until it returned.
   */
  public StoreHandle handle() {
    return life.peek();
  }

  /**
   * Releases the store, its values and its updater registrations (their free hooks run, so
   * the updaters become collectable); later calls do nothing. For a distributed worker this may
   * run the exit barrier, whose failure is thrown after the store is released anyway. Throws
   * {@link KVBusyException}, leaving the store open and usable, while a call on it runs: on
   * another thread, or the push whose updater calls close().
   */
  @Override
  public void close() {
    if (life.close()) cleanable.clean(); // the Cleaner's run is a no-op now
  }

  /** One native call on the store's handle and the handles of up to two array lists. */
  @FunctionalInterface
  private interface NativeCall {
    void run(StoreHandle store, ArrayHandle[] first, ArrayHandle[] second);
  }

  private static final NDArray[] NO_ARRAYS = {};
  private static final ArrayHandle[] NO_HANDLES = {};

  /**
   * Runs one native call on this store and the arrays of lists {@code first} and
   * {@code second} (a list whose name is null is not used). The lists are copied first, so
   * the arrays that are left are the ones that were entered; see the class comment. Every
   * native call KVStore makes on its store goes through this or callDirect / callOneDirect.
   */
  private void call(NDArray[] first, String firstName, NDArray[] second, String secondName,
      NativeCall body) {
    NDArray[] a = operands(first, firstName);
    NDArray[] b = operands(second, secondName);
    StoreHandle s = life.enter();
    int na = 0;
    int nb = 0;
    try {
      ArrayHandle[] ha = a.length == 0 ? NO_HANDLES : new ArrayHandle[a.length];
      for (; na < a.length; ++na) ha[na] = a[na].life.enter();
      ArrayHandle[] hb = b.length == 0 ? NO_HANDLES : new ArrayHandle[b.length];
      for (; nb < b.length; ++nb) hb[nb] = b[nb].life.enter();
      body.run(s, ha, hb);
    } finally {
      for (int i = 0; i < na; ++i) a[i].life.exit();
      for (int i = 0; i < nb; ++i) b[i].life.exit();
      life.exit();
      Reference.reachabilityFence(this);
      Reference.reachabilityFence(a);
      Reference.reachabilityFence(b);
    }
  }

  /** A hot native call: the store's and the arrays' addresses, no ArrayHandle objects. */
  @FunctionalInterface
  private interface DirectCall {
    void run(long store, long[] arrays);
  }

  /**
   * call(arrays, what, null, null, ...) for the hot int-key push and pull: the same checks, in
   * the same order, with the same messages and the same entering and fencing, but the native
   * call gets the entered arrays' addresses in a long[] (KVStoreLibJNI.pushInts / pullInts)
   * instead of an ArrayHandle[] that the generated wrapper reads element by element.
   */
  private void callDirect(NDArray[] arrays, String what, DirectCall body) {
    NDArray[] a = operands(arrays, what);
    StoreHandle s = life.enter();
    int n = 0;
    try {
      long[] addrs = new long[a.length];
      for (; n < a.length; ++n) addrs[n] = a[n].life.enter().address();
      body.run(s.address(), addrs);
    } finally {
      for (int i = 0; i < n; ++i) a[i].life.exit();
      life.exit();
      Reference.reachabilityFence(this);
      Reference.reachabilityFence(a);
    }
  }

  /**
   * callDirect() for one array (one key with one value or output): no list to copy, no
   * handle loop, the same checks and messages as callDirect(one(array), what, ...).
   */
  private void callOneDirect(NDArray array, String what, int key, int priority, boolean push) {
    if (array == null) throw new KVNullPointerException(what + "[0] is null");
    StoreHandle s = life.enter();
    try {
      long h = array.life.enter().address();
      try {
        if (push) {
          KVStoreLibJNI.pushOne(s.address(), key, h, priority);
        } else {
          KVStoreLibJNI.pullOne(s.address(), key, h, priority);
        }
      } finally {
        array.life.exit();
      }
    } finally {
      life.exit();
      Reference.reachabilityFence(this);
      Reference.reachabilityFence(array);
    }
  }

  /** A call on the store alone. */
  private void call(NativeCall body) {
    call(null, null, null, null, body);
  }

  /** A checked copy of an array list; NO_ARRAYS when the list is not used (name null). */
  private static NDArray[] operands(NDArray[] arrays, String what) {
    if (what == null) return NO_ARRAYS;
    if (arrays == null) throw new KVNullPointerException(what + " is null");
    NDArray[] copy = arrays.clone();
    for (int i = 0; i < copy.length; ++i) {
      if (copy[i] == null) throw new KVNullPointerException(what + "[" + i + "] is null");
    }
    return copy;
  }

  // ------------------------------------------------------------------------------------------
  // Properties

  /** The type name given to create, lowercased. */
  public String type() {
    String[] out = new String[1];
    call((h, u, v) -> KVStoreLib.KVStoreGetType(h, out));
    return out[0];
  }

  /** Rank of this worker (0 for in-process stores). */
  public int rank() {
    int[] out = new int[1];
    call((h, u, v) -> KVStoreLib.KVStoreGetRank(h, out));
    return out[0];
  }

  /** Number of workers (1 for in-process stores). */
  public int numWorkers() {
    int[] out = new int[1];
    call((h, u, v) -> KVStoreLib.KVStoreGetGroupSize(h, out));
    return out[0];
  }

  /** Waits for every worker (immediate for in-process stores). */
  public void barrier() {
    call((h, u, v) -> KVStoreLib.KVStoreBarrier(h));
  }

  /** Waits for pending asynchronous operations of this store. */
  public void waitAll() {
    call((h, u, v) -> KVStoreLib.KVStoreWaitAll(h));
  }

  /** Nodes of the groups {@code nodeId} without a heartbeat for {@code timeoutSec}. */
  public int numDeadNode(int nodeId, int timeoutSec) {
    int[] out = new int[1];
    call((h, u, v) -> KVStoreLib.KVStoreGetNumDeadNode(h, nodeId, timeoutSec, out));
    return out[0];
  }

  /** Whether close() on a distributed worker runs a barrier of all workers first. */
  public void setBarrierBeforeExit(boolean barrier) {
    call((h, u, v) -> KVStoreLib.KVStoreSetBarrierBeforeExit(h, barrier ? 1 : 0));
  }

  /** Sends a command (head >= 0) to every server. */
  public void sendCommandToServers(int head, String body) {
    call((h, u, v) -> KVStoreLib.KVStoreSendCommandToServers(h, head, body));
  }

  /** Installs a built-in optimizer as the updater, e.g. "sgd(learning_rate=0.1)". */
  public void setOptimizer(String spec) {
    call((h, u, v) -> KVStoreLib.KVStoreSetOptimizer(h, spec));
  }

  /**
   * Writes the state of the store's built-in optimizer to the file {@code path}, atomically, in
   * the format of docs/OPTIMIZER-STATES.md. Throws KVNotSupportedException when the store has no
   * built-in optimizer ({@link #setOptimizer}) or keeps its state elsewhere, and
   * KVInvalidArgumentException when the file cannot be written.
   */
  public void saveOptimizerStates(String path) {
    call((h, u, v) -> KVStoreLib.KVStoreSaveOptimizerStates(h, path));
  }

  /** {@link #saveOptimizerStates(String)} with a {@link java.nio.file.Path}. */
  public void saveOptimizerStates(java.nio.file.Path path) {
    saveOptimizerStates(path.toString());
  }

  /**
   * Replaces the state of the store's built-in optimizer with the state saved in {@code path};
   * training then continues exactly as it would have from the save. Everything is checked
   * first: a corrupt or truncated file, another optimizer (KVInvalidArgumentException), a key
   * the store lacks (KVUnknownKeyException), another shape or dtype (KVShapeMismatchException,
   * KVDtypeMismatchException) change nothing.
   */
  public void loadOptimizerStates(String path) {
    call((h, u, v) -> KVStoreLib.KVStoreLoadOptimizerStates(h, path));
  }

  /** {@link #loadOptimizerStates(String)} with a {@link java.nio.file.Path}. */
  public void loadOptimizerStates(java.nio.file.Path path) {
    loadOptimizerStates(path.toString());
  }

  /** Installs a built-in optimizer, e.g. {@code Optimizer.sgd().learningRate(0.1)}. */
  public void setOptimizer(Optimizer optimizer) {
    if (optimizer == null) throw new KVNullPointerException("optimizer is null");
    setOptimizer(optimizer.spec());
  }

  /**
   * Compresses later pushes with the reference's gradient compression: {@code {"type": "2bit",
   * "threshold": 0.5}} (or {@code "1bit"}; threshold defaults to 0.5), with a residual per key
   * (error feedback); {@code {"type": "none"}} turns it off again (the residuals are dropped).
   * Values are converted with {@code toString()}. float32 and float16 pushes are compressed,
   * other dtypes go uncompressed; init and pull never are. The device and dist_* stores
   * compress; the others throw {@link KVNotSupportedException}. Unknown names, types or a bad
   * threshold throw {@link KVInvalidArgumentException} and change nothing.
   */
  public void setGradientCompression(java.util.Map<String, ?> params) {
    if (params == null) throw new KVNullPointerException("params is null");
    String[] names = new String[params.size()];
    String[] values = new String[params.size()];
    int i = 0;
    for (java.util.Map.Entry<String, ?> e : params.entrySet()) {
      if (e.getKey() == null || e.getValue() == null) {
        throw new KVNullPointerException("gradient compression parameter " + e.getKey() + " is null");
      }
      names[i] = e.getKey();
      values[i++] = e.getValue().toString();
    }
    call((h, u, v) -> KVStoreLib.KVStoreSetGradientCompression(h, names, values));
  }

  /** The capability of running built-in optimizers, for {@link #isCapable}. */
  public static final String OPTIMIZER = "optimizer";

  /**
   * Whether the store has {@code capability} (case-insensitive): {@link #OPTIMIZER} is true for
   * every store type. An unknown name throws {@link KVInvalidArgumentException} naming the known
   * ones.
   */
  public boolean isCapable(String capability) {
    int[] out = new int[1];
    call((h, u, v) -> KVStoreLib.KVStoreIsCapable(h, capability, out));
    return out[0] != 0;
  }

  // ------------------------------------------------------------------------------------------
  // Updaters

  /**
   * Sets the int-key updater ({@code null} restores assign). The store holds the updater until
   * it is replaced or the store is closed; then {@link Updater#released()} runs and the store
   * drops its reference.
   */
  public void setUpdater(Updater updater) {
    KVStoreLib.Updater bridge = updater == null ? null : new IntBridge(updater);
    call((h, u, v) -> KVStoreLib.KVStoreSetUpdater(h, bridge));
  }

  /** Sets the String-key updater ({@code null} clears it). */
  public void setStrUpdater(StrUpdater updater) {
    KVStoreLib.StrUpdater bridge = updater == null ? null : new StrBridge(updater);
    call((h, u, v) -> KVStoreLib.KVStoreSetStrUpdater(h, bridge));
  }

  /**
   * Runs {@code body} on the updater call's two arrays, lent as NDArrays that are invalid once
   * it returns (the library owns the arrays).
   */
  private static void lend(ArrayHandle recv, ArrayHandle stored, BiConsumer<NDArray, NDArray> body) {
    NDArray r = NDArray.borrow(recv);
    NDArray s = NDArray.borrow(stored);
    try {
      body.accept(r, s);
    } finally {
      r.invalidate();
      s.invalidate();
    }
  }

  /** Adapts the user's updater to the trampoline's handles; lends NDArrays for one call. */
  private static final class IntBridge implements KVStoreLib.Updater {
    private final Updater user;

    IntBridge(Updater user) {
      this.user = user;
    }

    @Override
    public void update(int key, ArrayHandle recv, ArrayHandle stored) {
      lend(recv, stored, (r, s) -> user.update(key, r, s));
    }

    @Override
    public void release() {
      user.released();
    }
  }

  private static final class StrBridge implements KVStoreLib.StrUpdater {
    private final StrUpdater user;

    StrBridge(StrUpdater user) {
      this.user = user;
    }

    @Override
    public void update(String key, ArrayHandle recv, ArrayHandle stored) {
      lend(recv, stored, (r, s) -> user.update(key, r, s));
    }

    @Override
    public void release() {
      user.released();
    }
  }

  // ------------------------------------------------------------------------------------------
  // Data calls

  private static int[] repeat(int key, int n) {
    int[] k = new int[n];
    Arrays.fill(k, key);
    return k;
  }

  private static String[] repeat(String key, int n) {
    String[] k = new String[n];
    Arrays.fill(k, key);
    return k;
  }

  private static NDArray[] one(NDArray a) {
    return new NDArray[] {a};
  }

  private static int len(NDArray[] a, String what) {
    if (a == null) throw new KVNullPointerException(what + " is null");
    return a.length;
  }

  /** Initialises keys[i] with a copy of values[i]. */
  public void init(int[] keys, NDArray[] values) {
    call(values, "values", null, null,
        (h, v, u) -> KVStoreLib.KVStoreInit(h, keys, v));
  }

  public void init(int key, NDArray value) {
    init(new int[] {key}, one(value));
  }

  public void init(String[] keys, NDArray[] values) {
    call(values, "values", null, null,
        (h, v, u) -> KVStoreLib.KVStoreInitStr(h, keys, v));
  }

  public void init(String key, NDArray value) {
    init(new String[] {key}, one(value));
  }

  /** Pushes values[i] to keys[i]; values of a repeated key are summed. */
  public void push(int[] keys, NDArray[] values, int priority) {
    callDirect(values, "values", (h, v) -> KVStoreLibJNI.pushInts(h, keys, v, priority));
  }

  public void push(int[] keys, NDArray[] values) {
    push(keys, values, 0);
  }

  public void push(int key, NDArray value) {
    push(key, value, 0);
  }

  public void push(int key, NDArray value, int priority) {
    callOneDirect(value, "values", key, priority, true);
  }

  /** Pushes several values for one key (summed, e.g. one per device). */
  public void push(int key, NDArray[] values) {
    push(repeat(key, len(values, "values")), values, 0);
  }

  public void push(int key, NDArray[] values, int priority) {
    push(repeat(key, len(values, "values")), values, priority);
  }

  public void push(String[] keys, NDArray[] values, int priority) {
    call(values, "values", null, null,
        (h, v, u) -> KVStoreLib.KVStorePushStr(h, keys, v, priority));
  }

  public void push(String[] keys, NDArray[] values) {
    push(keys, values, 0);
  }

  public void push(String key, NDArray value) {
    push(new String[] {key}, one(value), 0);
  }

  public void push(String key, NDArray value, int priority) {
    push(new String[] {key}, one(value), priority);
  }

  public void push(String key, NDArray[] values) {
    push(repeat(key, len(values, "values")), values, 0);
  }

  public void push(String key, NDArray[] values, int priority) {
    push(repeat(key, len(values, "values")), values, priority);
  }

  /** Copies the stored value of keys[i] into outs[i]. */
  public void pull(int[] keys, NDArray[] outs, int priority) {
    callDirect(outs, "outs", (h, v) -> KVStoreLibJNI.pullInts(h, keys, v, priority));
  }

  public void pull(int[] keys, NDArray[] outs) {
    pull(keys, outs, 0);
  }

  public void pull(int key, NDArray out) {
    pull(key, out, 0);
  }

  public void pull(int key, NDArray out, int priority) {
    callOneDirect(out, "outs", key, priority, false);
  }

  /** Copies the stored value of one key into every output (e.g. one per device). */
  public void pull(int key, NDArray[] outs) {
    pull(repeat(key, len(outs, "outs")), outs, 0);
  }

  public void pull(int key, NDArray[] outs, int priority) {
    pull(repeat(key, len(outs, "outs")), outs, priority);
  }

  public void pull(String[] keys, NDArray[] outs, int priority) {
    call(outs, "outs", null, null,
        (h, v, u) -> KVStoreLib.KVStorePullStr(h, keys, v, priority));
  }

  public void pull(String[] keys, NDArray[] outs) {
    pull(keys, outs, 0);
  }

  public void pull(String key, NDArray out) {
    pull(new String[] {key}, one(out), 0);
  }

  public void pull(String key, NDArray out, int priority) {
    pull(new String[] {key}, one(out), priority);
  }

  public void pull(String key, NDArray[] outs) {
    pull(repeat(key, len(outs, "outs")), outs, 0);
  }

  public void pull(String key, NDArray[] outs, int priority) {
    pull(repeat(key, len(outs, "outs")), outs, priority);
  }

  /** Push of (keys, values), then pull of (outKeys, outs), as one call. */
  public void pushPull(int[] keys, NDArray[] values, int[] outKeys, NDArray[] outs, int priority) {
    call(values, "values", outs, "outs",
        (h, v, o) -> KVStoreLib.KVStorePushPull(h, keys, v, outKeys, o, priority));
  }

  public void pushPull(int key, NDArray value, NDArray out) {
    pushPull(new int[] {key}, one(value), new int[] {key}, one(out), 0);
  }

  public void pushPull(String[] keys, NDArray[] values, String[] outKeys, NDArray[] outs, int priority) {
    call(values, "values", outs, "outs",
        (h, v, o) -> KVStoreLib.KVStorePushPullStr(h, keys, v, outKeys, o, priority));
  }

  public void pushPull(String key, NDArray value, NDArray out) {
    pushPull(new String[] {key}, one(value), new String[] {key}, one(out), 0);
  }

  /** Init of (keys, values), then pull of (outKeys, outs). */
  public void broadcast(int[] keys, NDArray[] values, int[] outKeys, NDArray[] outs, int priority) {
    call(values, "values", outs, "outs",
        (h, v, o) -> KVStoreLib.KVStoreBroadcast(h, keys, v, outKeys, o, priority));
  }

  public void broadcast(int key, NDArray value, NDArray out) {
    broadcast(new int[] {key}, one(value), new int[] {key}, one(out), 0);
  }

  public void broadcast(String[] keys, NDArray[] values, String[] outKeys, NDArray[] outs, int priority) {
    call(values, "values", outs, "outs",
        (h, v, o) -> KVStoreLib.KVStoreBroadcastStr(h, keys, v, outKeys, o, priority));
  }

  public void broadcast(String key, NDArray value, NDArray out) {
    broadcast(new String[] {key}, one(value), new String[] {key}, one(out), 0);
  }

  // ------------------------------------------------------------------------------------------
  // Row-sparse pull. outs[i] (a row_sparse array of the key's shape and dtype, e.g. from
  // NDArray.rowSparseZeros) receives exactly the rows of keys[i]'s stored value named by
  // rowIds[i]: a dense array of integral row numbers of any dtype and shape, in any order,
  // repeats allowed. Each output's row set and block are replaced. One rowIds array may serve
  // several outputs (the reference's one row_ids for many outs). Local and device stores; a
  // failure (a row id out of range, a dense output) changes no output.

  /** Pulls rows rowIds[i] of keys[i] into outs[i]. */
  public void rowSparsePull(int[] keys, NDArray[] outs, NDArray[] rowIds, int priority) {
    call(outs, "outs", rowIds, "rowIds",
        (h, o, r) -> KVStoreLib.KVStoreRowSparsePull(h, keys, o, r, priority));
  }

  public void rowSparsePull(int[] keys, NDArray[] outs, NDArray[] rowIds) {
    rowSparsePull(keys, outs, rowIds, 0);
  }

  /** The same rowIds for every output. */
  public void rowSparsePull(int[] keys, NDArray[] outs, NDArray rowIds) {
    rowSparsePull(keys, outs, repeat(rowIds, len(outs, "outs")), 0);
  }

  public void rowSparsePull(int key, NDArray out, NDArray rowIds) {
    rowSparsePull(new int[] {key}, one(out), one(rowIds), 0);
  }

  public void rowSparsePull(int key, NDArray out, NDArray rowIds, int priority) {
    rowSparsePull(new int[] {key}, one(out), one(rowIds), priority);
  }

  /** The rows rowIds of one key into every output (e.g. one per device). */
  public void rowSparsePull(int key, NDArray[] outs, NDArray rowIds) {
    int n = len(outs, "outs");
    rowSparsePull(repeat(key, n), outs, repeat(rowIds, n), 0);
  }

  public void rowSparsePull(String[] keys, NDArray[] outs, NDArray[] rowIds, int priority) {
    call(outs, "outs", rowIds, "rowIds",
        (h, o, r) -> KVStoreLib.KVStoreRowSparsePullStr(h, keys, o, r, priority));
  }

  public void rowSparsePull(String[] keys, NDArray[] outs, NDArray[] rowIds) {
    rowSparsePull(keys, outs, rowIds, 0);
  }

  public void rowSparsePull(String[] keys, NDArray[] outs, NDArray rowIds) {
    rowSparsePull(keys, outs, repeat(rowIds, len(outs, "outs")), 0);
  }

  public void rowSparsePull(String key, NDArray out, NDArray rowIds) {
    rowSparsePull(new String[] {key}, one(out), one(rowIds), 0);
  }

  public void rowSparsePull(String key, NDArray out, NDArray rowIds, int priority) {
    rowSparsePull(new String[] {key}, one(out), one(rowIds), priority);
  }

  public void rowSparsePull(String key, NDArray[] outs, NDArray rowIds) {
    int n = len(outs, "outs");
    rowSparsePull(repeat(key, n), outs, repeat(rowIds, n), 0);
  }

  private static NDArray[] repeat(NDArray a, int n) {
    if (a == null) throw new KVNullPointerException("rowIds is null");
    NDArray[] r = new NDArray[n];
    Arrays.fill(r, a);
    return r;
  }

  @Override
  public String toString() {
    return life.isClosed() ? "KVStore(closed)" : "KVStore(" + type() + ")";
  }
}
