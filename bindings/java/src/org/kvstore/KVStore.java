package org.kvstore;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.util.ArrayDeque;
import java.util.Arrays;
import org.kvstore.swig.ArrayHandle;
import org.kvstore.swig.KVStoreLib;
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
 */
public final class KVStore implements AutoCloseable {
  private static final Cleaner CLEANER = Cleaner.create();

  /** Node groups for {@link #numDeadNode}. */
  public static final int GROUP_NODE_SCHEDULER = 1;
  public static final int GROUP_NODE_SERVER = 2;
  public static final int GROUP_NODE_WORKER = 4;

  private static final class Freer implements Runnable {
    private final StoreHandle handle;

    Freer(StoreHandle handle) {
      this.handle = handle;
    }

    @Override
    public void run() {
      try {
        KVStoreLib.KVStoreFree(handle);
      } finally {
        handle.delete();
      }
    }
  }

  /** Stores whose updater is running on this thread (close() from there would free a store
   * in the middle of its own push). */
  private static final ThreadLocal<ArrayDeque<StoreHandle>> IN_UPDATER =
      ThreadLocal.withInitial(ArrayDeque::new);

  private volatile StoreHandle handle;
  private final Cleaner.Cleanable cleanable;

  private KVStore(StoreHandle handle) {
    this.handle = handle;
    this.cleanable = CLEANER.register(this, new Freer(handle));
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

  /** The native handle (for the org.kvstore.swig layer); throws if closed. */
  public StoreHandle handle() {
    return h();
  }

  private StoreHandle h() {
    StoreHandle x = handle;
    if (x == null) throw new IllegalStateException("KVStore is closed");
    return x;
  }

  /**
   * Releases the store, its values and its updater registrations (their free hooks run, so
   * the updaters become collectable). For a distributed worker this may run the exit barrier,
   * whose failure is thrown after the store is released anyway.
   */
  @Override
  public void close() {
    StoreHandle x = handle;
    if (x == null) return;
    if (IN_UPDATER.get().contains(x)) {
      throw new IllegalStateException("a KVStore cannot be closed from inside its own updater");
    }
    handle = null;
    cleanable.clean();
  }

  // ------------------------------------------------------------------------------------------
  // Properties

  /** The type name given to create, lowercased. */
  public String type() {
    String[] out = new String[1];
    try {
      KVStoreLib.KVStoreGetType(h(), out);
    } finally {
      Reference.reachabilityFence(this);
    }
    return out[0];
  }

  /** Rank of this worker (0 for in-process stores). */
  public int rank() {
    int[] out = new int[1];
    try {
      KVStoreLib.KVStoreGetRank(h(), out);
    } finally {
      Reference.reachabilityFence(this);
    }
    return out[0];
  }

  /** Number of workers (1 for in-process stores). */
  public int numWorkers() {
    int[] out = new int[1];
    try {
      KVStoreLib.KVStoreGetGroupSize(h(), out);
    } finally {
      Reference.reachabilityFence(this);
    }
    return out[0];
  }

  /** Waits for every worker (immediate for in-process stores). */
  public void barrier() {
    try {
      KVStoreLib.KVStoreBarrier(h());
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Waits for pending asynchronous operations of this store. */
  public void waitAll() {
    try {
      KVStoreLib.KVStoreWaitAll(h());
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Nodes of the groups {@code nodeId} without a heartbeat for {@code timeoutSec}. */
  public int numDeadNode(int nodeId, int timeoutSec) {
    int[] out = new int[1];
    try {
      KVStoreLib.KVStoreGetNumDeadNode(h(), nodeId, timeoutSec, out);
    } finally {
      Reference.reachabilityFence(this);
    }
    return out[0];
  }

  /** Whether close() on a distributed worker runs a barrier of all workers first. */
  public void setBarrierBeforeExit(boolean barrier) {
    try {
      KVStoreLib.KVStoreSetBarrierBeforeExit(h(), barrier ? 1 : 0);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Sends a command (head >= 0) to every server. */
  public void sendCommandToServers(int head, String body) {
    try {
      KVStoreLib.KVStoreSendCommandToServers(h(), head, body);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Installs a built-in optimizer as the updater, e.g. "sgd(learning_rate=0.1)". */
  public void setOptimizer(String spec) {
    try {
      KVStoreLib.KVStoreSetOptimizer(h(), spec);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  // ------------------------------------------------------------------------------------------
  // Updaters

  /**
   * Sets the int-key updater ({@code null} restores assign). The store holds the updater until
   * it is replaced or the store is closed; then {@link Updater#released()} runs and the store
   * drops its reference.
   */
  public void setUpdater(Updater updater) {
    try {
      KVStoreLib.KVStoreSetUpdater(h(), updater == null ? null : new IntBridge(h(), updater));
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Sets the String-key updater ({@code null} clears it). */
  public void setStrUpdater(StrUpdater updater) {
    try {
      KVStoreLib.KVStoreSetStrUpdater(h(), updater == null ? null : new StrBridge(h(), updater));
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Adapts the user's updater to the trampoline's handles; lends NDArrays for one call. */
  private static final class IntBridge implements KVStoreLib.Updater {
    private final StoreHandle store; // the handle only: never the KVStore (see close())
    private final Updater user;

    IntBridge(StoreHandle store, Updater user) {
      this.store = store;
      this.user = user;
    }

    @Override
    public void update(int key, ArrayHandle recv, ArrayHandle stored) {
      NDArray r = NDArray.borrow(recv);
      NDArray s = NDArray.borrow(stored);
      ArrayDeque<StoreHandle> active = IN_UPDATER.get();
      active.push(store);
      try {
        user.update(key, r, s);
      } finally {
        active.pop();
        r.invalidate();
        s.invalidate();
      }
    }

    @Override
    public void release() {
      user.released();
    }
  }

  private static final class StrBridge implements KVStoreLib.StrUpdater {
    private final StoreHandle store; // the handle only: never the KVStore (see close())
    private final StrUpdater user;

    StrBridge(StoreHandle store, StrUpdater user) {
      this.store = store;
      this.user = user;
    }

    @Override
    public void update(String key, ArrayHandle recv, ArrayHandle stored) {
      NDArray r = NDArray.borrow(recv);
      NDArray s = NDArray.borrow(stored);
      ArrayDeque<StoreHandle> active = IN_UPDATER.get();
      active.push(store);
      try {
        user.update(key, r, s);
      } finally {
        active.pop();
        r.invalidate();
        s.invalidate();
      }
    }

    @Override
    public void release() {
      user.released();
    }
  }

  // ------------------------------------------------------------------------------------------
  // Data calls

  private static ArrayHandle[] handles(NDArray[] arrays, String what) {
    if (arrays == null) throw new KVNullPointerException(what + " is null");
    ArrayHandle[] hs = new ArrayHandle[arrays.length];
    for (int i = 0; i < arrays.length; ++i) {
      if (arrays[i] == null) throw new KVNullPointerException(what + "[" + i + "] is null");
      hs[i] = arrays[i].handle();
    }
    return hs;
  }

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
    try {
      KVStoreLib.KVStoreInit(h(), keys, handles(values, "values"));
    } finally {
      Reference.reachabilityFence(this); Reference.reachabilityFence(values);
    }
  }

  public void init(int key, NDArray value) {
    init(new int[] {key}, one(value));
  }

  public void init(String[] keys, NDArray[] values) {
    try {
      KVStoreLib.KVStoreInitStr(h(), keys, handles(values, "values"));
    } finally {
      Reference.reachabilityFence(this); Reference.reachabilityFence(values);
    }
  }

  public void init(String key, NDArray value) {
    init(new String[] {key}, one(value));
  }

  /** Pushes values[i] to keys[i]; values of a repeated key are summed. */
  public void push(int[] keys, NDArray[] values, int priority) {
    try {
      KVStoreLib.KVStorePush(h(), keys, handles(values, "values"), priority);
    } finally {
      Reference.reachabilityFence(this); Reference.reachabilityFence(values);
    }
  }

  public void push(int[] keys, NDArray[] values) {
    push(keys, values, 0);
  }

  public void push(int key, NDArray value) {
    push(new int[] {key}, one(value), 0);
  }

  public void push(int key, NDArray value, int priority) {
    push(new int[] {key}, one(value), priority);
  }

  /** Pushes several values for one key (summed, e.g. one per device). */
  public void push(int key, NDArray[] values) {
    push(repeat(key, len(values, "values")), values, 0);
  }

  public void push(int key, NDArray[] values, int priority) {
    push(repeat(key, len(values, "values")), values, priority);
  }

  public void push(String[] keys, NDArray[] values, int priority) {
    try {
      KVStoreLib.KVStorePushStr(h(), keys, handles(values, "values"), priority);
    } finally {
      Reference.reachabilityFence(this); Reference.reachabilityFence(values);
    }
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
    try {
      KVStoreLib.KVStorePull(h(), keys, handles(outs, "outs"), priority);
    } finally {
      Reference.reachabilityFence(this); Reference.reachabilityFence(outs);
    }
  }

  public void pull(int[] keys, NDArray[] outs) {
    pull(keys, outs, 0);
  }

  public void pull(int key, NDArray out) {
    pull(new int[] {key}, one(out), 0);
  }

  public void pull(int key, NDArray out, int priority) {
    pull(new int[] {key}, one(out), priority);
  }

  /** Copies the stored value of one key into every output (e.g. one per device). */
  public void pull(int key, NDArray[] outs) {
    pull(repeat(key, len(outs, "outs")), outs, 0);
  }

  public void pull(int key, NDArray[] outs, int priority) {
    pull(repeat(key, len(outs, "outs")), outs, priority);
  }

  public void pull(String[] keys, NDArray[] outs, int priority) {
    try {
      KVStoreLib.KVStorePullStr(h(), keys, handles(outs, "outs"), priority);
    } finally {
      Reference.reachabilityFence(this); Reference.reachabilityFence(outs);
    }
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
    try {
      KVStoreLib.KVStorePushPull(h(), keys, handles(values, "values"), outKeys, handles(outs, "outs"), priority);
    } finally {
      Reference.reachabilityFence(this); Reference.reachabilityFence(values); Reference.reachabilityFence(outs);
    }
  }

  public void pushPull(int key, NDArray value, NDArray out) {
    pushPull(new int[] {key}, one(value), new int[] {key}, one(out), 0);
  }

  public void pushPull(String[] keys, NDArray[] values, String[] outKeys, NDArray[] outs, int priority) {
    try {
      KVStoreLib.KVStorePushPullStr(h(), keys, handles(values, "values"), outKeys, handles(outs, "outs"), priority);
    } finally {
      Reference.reachabilityFence(this); Reference.reachabilityFence(values); Reference.reachabilityFence(outs);
    }
  }

  public void pushPull(String key, NDArray value, NDArray out) {
    pushPull(new String[] {key}, one(value), new String[] {key}, one(out), 0);
  }

  /** Init of (keys, values), then pull of (outKeys, outs). */
  public void broadcast(int[] keys, NDArray[] values, int[] outKeys, NDArray[] outs, int priority) {
    try {
      KVStoreLib.KVStoreBroadcast(h(), keys, handles(values, "values"), outKeys, handles(outs, "outs"), priority);
    } finally {
      Reference.reachabilityFence(this); Reference.reachabilityFence(values); Reference.reachabilityFence(outs);
    }
  }

  public void broadcast(int key, NDArray value, NDArray out) {
    broadcast(new int[] {key}, one(value), new int[] {key}, one(out), 0);
  }

  public void broadcast(String[] keys, NDArray[] values, String[] outKeys, NDArray[] outs, int priority) {
    try {
      KVStoreLib.KVStoreBroadcastStr(h(), keys, handles(values, "values"), outKeys, handles(outs, "outs"), priority);
    } finally {
      Reference.reachabilityFence(this); Reference.reachabilityFence(values); Reference.reachabilityFence(outs);
    }
  }

  public void broadcast(String key, NDArray value, NDArray out) {
    broadcast(new String[] {key}, one(value), new String[] {key}, one(out), 0);
  }

  @Override
  public String toString() {
    return handle == null ? "KVStore(closed)" : "KVStore(" + type() + ")";
  }
}
