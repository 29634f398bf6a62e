package org.kvstore.test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.kvstore.KVInvalidArgumentException;
import org.kvstore.KVStore;
import org.kvstore.NDArray;
import org.kvstore.Profiler;
import org.kvstore.Shape;

/**
 * org.kvstore.Profiler (docs/PROFILING.md): the per-key counters of a local store, the
 * timeline it writes, and refusals. Exits 1 on any failure.
 */
public final class ProfilerTest {
  private static int failed;

  private ProfilerTest() {}

  private static void check(String what, boolean ok) {
    if (!ok) {
      ++failed;
      System.out.println("FAIL: " + what);
    }
  }

  public static void main(String[] args) throws Exception {
    Path dir = Files.createTempDirectory("kvprofile");
    Path trace = dir.resolve("t.json");
    Shape shape = Shape.of(256);
    try (KVStore kv = KVStore.create("local");
        NDArray ones = NDArray.ones(shape);
        NDArray out = NDArray.zeros(shape)) {
      kv.init(3, ones);
      Profiler.start(trace.toString());
      try {
        Profiler.start(trace.toString());
        check("a second start is refused", false);
      } catch (KVInvalidArgumentException e) {
        check("the refusal says why: " + e.getMessage(), e.getMessage().contains("already runs"));
      }
      kv.push(3, ones);
      kv.push(3, ones);
      kv.pull(3, out);
      Profiler.stop();
    }
    String stats = Profiler.stats();
    check("counters of key 3: " + stats, stats.contains(
        "{\"key\":3,\"pushes\":2,\"pulls\":1,\"bytes_pushed\":2048,\"bytes_pulled\":1024,"));
    check("stopped: " + stats, stats.contains("\"running\":false"));
    String json = new String(Files.readAllBytes(trace), StandardCharsets.UTF_8);
    check("push spans with their bytes",
        json.split("\"name\":\"push\",\"cat\":\"kvstore\"", -1).length - 1 == 2
            && json.contains("\"args\":{\"key\":null,\"bytes\":1024}"));
    check("a reduce of key 3", json.contains("\"args\":{\"key\":3,\"bytes\":1024}"));
    try {
      Profiler.start(dir.resolve("no/such/t.json").toString());
      check("an unwritable folder is refused", false);
    } catch (KVInvalidArgumentException e) {
      check("the refusal says why: " + e.getMessage(), e.getMessage().contains("not writable"));
    }
    Profiler.start(null);  // counters only, from zero
    check("a new run starts from zero", Profiler.stats().contains("\"keys\":[]"));
    Profiler.stop();
    Files.delete(trace);
    Files.delete(dir);
    System.out.println(failed == 0 ? "profiler: all checks passed" : "profiler: " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
