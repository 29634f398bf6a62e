package org.kvstore;

import org.kvstore.swig.KVStoreLib;

/**
 * The library's profiler (docs/PROFILING.md): a Chrome-trace timeline of this process's
 * stores (pushes, pulls, messages, rounds, reductions, optimizer applies, per key with bytes)
 * and per-key counters. It belongs to the process, not to a store.
 *
 * <pre>
 *   Profiler.start("trace.json");   // or KVSTORE_PROFILE=trace.json in the environment
 *   ...                              // pushes and pulls
 *   Profiler.stop();                 // writes trace.json (trace.worker0.json on a dist worker)
 *   String json = Profiler.stats();  // {"node":..., "running":..., "keys":[{"key":3, "pushes":2, ...}]}
 * </pre>
 */
public final class Profiler {
  private Profiler() {}

  /**
   * Starts recording: the timeline is written to {@code path} at {@link #stop()} (null:
   * counters only). Throws {@link KVStoreException} (INVALID_ARGUMENT) when the profiler
   * already runs or the folder of {@code path} is not writable.
   */
  public static void start(String path) {
    KVStoreLib.KVProfileStart(path);
  }

  /** Stops recording and writes the timeline, if {@link #start} named a path. */
  public static void stop() {
    KVStoreLib.KVProfileStop();
  }

  /**
   * The per-key counters of the current or last run as JSON text (KVProfileGetStats in
   * kvstore.h says what each field counts).
   */
  public static String stats() {
    String[] out = new String[1];
    KVStoreLib.KVProfileGetStats(out);
    return out[0];
  }
}
