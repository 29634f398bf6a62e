package org.kvstore;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The lifetime of one native handle (an array or a store), shared by the Java object that owns
 * it, the native calls running on it and the zero-copy views of its memory. The handle is
 * released only when none of them uses it any more.
 *
 * <p>State is one atomic word: the number of running calls (bits 0-30), the number of live
 * views (bits 31-61) and CLOSED (bit 62). Protocol:
 * <ol>
 *   <li>Every native call that is given the handle runs between {@link #enter()} and
 *       {@link #exit()}; enter() fails once CLOSED is set.
 *   <li>{@link #close()} sets CLOSED only while no call runs; otherwise it throws
 *       {@link KVBusyException} and changes nothing. The library refuses to free a handle that
 *       a call inside it holds, but it cannot see a call that has not entered it yet; this
 *       count covers the whole Java call, so a close() on another thread (or from inside the
 *       store's own updater) can never free memory that a call is about to use or is using.
 *   <li>A view is added during a call (so never after CLOSED) and dropped by the Cleaner once
 *       the view, and every buffer derived from it, is unreachable.
 *   <li>The handle is released by the one transition that reaches CLOSED with no call and no
 *       view: close() itself, or the drop of the last view after it. It happens at most once.
 * </ol>
 *
 * <p>Cost per call: one compare-and-set to enter and one atomic add to exit.
 */
final class Lifetime<H> {
  /** Frees a native handle; throws the KVStoreException of a failure. */
  @FunctionalInterface
  interface Release<H> {
    void release(H handle);
  }

  private static final long CALL = 1L;
  private static final long VIEW = 1L << 31;
  private static final long CALLS = VIEW - 1;
  private static final long CLOSED = 1L << 62;

  private final AtomicLong state = new AtomicLong();
  private final H handle;
  private final Release<H> release; // null for a borrowed handle: the library owns it
  private final String name;
  private final String closedMessage;

  /**
   * @param name what the handle is, for messages ("NDArray", "KVStore")
   * @param closedMessage the IllegalStateException message of a call after close
   */
  Lifetime(H handle, Release<H> release, String name, String closedMessage) {
    this.handle = handle;
    this.release = release;
    this.name = name;
    this.closedMessage = closedMessage;
  }

  /** Starts a call on the handle and returns it; IllegalStateException once closed. */
  H enter() {
    long s;
    do {
      s = state.get();
      if ((s & CLOSED) != 0) throw new IllegalStateException(closedMessage);
    } while (!state.compareAndSet(s, s + CALL));
    return handle;
  }

  /** Ends a call started by {@link #enter()}. */
  void exit() {
    state.getAndAdd(-CALL);
  }

  /** The handle without starting a call (raw access); IllegalStateException once closed. */
  H peek() {
    if (isClosed()) throw new IllegalStateException(closedMessage);
    return handle;
  }

  boolean isClosed() {
    return (state.get() & CLOSED) != 0;
  }

  /**
   * Closes the handle: released now, or by the drop of its last view. Returns false when it
   * was already closed. Throws KVBusyException, leaving the handle open and usable, while a
   * call runs; rethrows a failure of the release (a KVBusyException from the library, which
   * saw a call made through the raw layer, also leaves the handle open).
   */
  boolean close() {
    long s;
    do {
      s = state.get();
      if ((s & CLOSED) != 0) return false;
      if ((s & CALLS) != 0) {
        throw new KVBusyException(name + " is in use by " + (s & CALLS)
            + " call(s) that have not returned (on another thread, or the store's own updater);"
            + " it was not closed and stays usable");
      }
    } while (!state.compareAndSet(s, s | CLOSED));
    if (s != 0) return true; // views remain: the last one releases
    try {
      releaseNow();
    } catch (KVBusyException e) {
      state.set(0); // nothing was freed; CLOSED with no call or view admits no other change
      throw e;
    }
    return true;
  }

  /** close() for the Cleaner of an unreachable owner: failures have nobody to go to. */
  void closeQuietly() {
    try {
      close();
    } catch (RuntimeException e) {
      // Busy only through raw-layer misuse; the handle is then left to the library.
    }
  }

  /**
   * Ends a loan (borrowed handles): no new call may start, and this waits for calls that
   * another thread may still run on the handle, since the library frees it after this returns.
   */
  void revoke() {
    state.getAndUpdate(x -> x | CLOSED);
    while ((state.get() & CALLS) != 0) Thread.yield();
  }

  /** Counts a new view; only during a call (between enter and exit). */
  void addView() {
    state.getAndAdd(VIEW);
  }

  /** Drops a view (run by the Cleaner); the last view of a closed handle releases it. */
  void dropView() {
    if (state.addAndGet(-VIEW) != CLOSED) return;
    try {
      releaseNow();
    } catch (RuntimeException e) {
      // As in closeQuietly: nobody to report to on the Cleaner's thread.
    }
  }

  private void releaseNow() {
    if (release != null) release.release(handle);
  }
}
