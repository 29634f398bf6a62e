// BindingsBench.java - the Java side of the bindings bench (bench/bindings/run.py compiles
// and runs it against build/bindings/swig/java/kvstore.jar).
//
// The cells of bench_bindings_c.c, through org.kvstore.KVStore, with the same protocol: a
// "local" store holding key 0 and keys 1..100 of 4 float32 each; push1/pull1 per call,
// push100/pull100 one call of 100 keys, per key; --reps rounds of about --seconds of calls
// per cell, cells in turn, after a warm-up (which also lets the JIT compile the loops).
// Prints one JSON object: {"lang": "java", "push1": [ns, ...], ...}.
import java.util.Locale;
import org.kvstore.KVStore;
import org.kvstore.NDArray;
import org.kvstore.Shape;

public final class BindingsBench {
  private static final int NKEYS = 100;

  private interface Cell {
    void run();
  }

  /** Nanoseconds per run of cell over about `seconds` (the batch grown to a tenth first). */
  private static double time(Cell cell, double seconds) {
    long calls = 16;
    double t;
    for (;;) {
      long t0 = System.nanoTime();
      for (long i = 0; i < calls; ++i) cell.run();
      t = (System.nanoTime() - t0) * 1e-9;
      if (t >= seconds / 10) break;
      calls *= 4;
    }
    long n = Math.max(1, (long) (calls * seconds / t));
    long t0 = System.nanoTime();
    for (long i = 0; i < n; ++i) cell.run();
    return (double) (System.nanoTime() - t0) / n;
  }

  public static void main(String[] args) {
    int reps = 7;
    double seconds = 0.2;
    for (int i = 0; i < args.length; ++i) {
      if (args[i].equals("--reps")) reps = Integer.parseInt(args[++i]);
      else if (args[i].equals("--seconds")) seconds = Double.parseDouble(args[++i]);
      else throw new IllegalArgumentException("usage: BindingsBench [--reps N] [--seconds S]");
    }
    try (KVStore store = KVStore.create("local")) {
      NDArray one = NDArray.ones(Shape.of(4));
      NDArray[] many = new NDArray[NKEYS];
      int[] keys = new int[NKEYS];
      for (int i = 0; i < NKEYS; ++i) {
        many[i] = NDArray.ones(Shape.of(4));
        keys[i] = i + 1;
      }
      store.init(0, one);
      store.init(keys, many);
      String[] names = {"push1", "pull1", "push100", "pull100"};
      Cell[] cells = {
        () -> store.push(0, one),
        () -> store.pull(0, one),
        () -> store.push(keys, many),
        () -> store.pull(keys, many),
      };
      for (Cell c : cells) time(c, seconds / 2);  // warm-up and JIT
      double[][] figures = new double[cells.length][reps];
      for (int r = 0; r < reps; ++r) {
        for (int c = 0; c < cells.length; ++c) {
          figures[c][r] = time(cells[c], seconds) / (c < 2 ? 1 : NKEYS);
        }
      }
      StringBuilder out = new StringBuilder("{\"lang\": \"java\"");
      for (int c = 0; c < cells.length; ++c) {
        out.append(", \"").append(names[c]).append("\": [");
        for (int r = 0; r < reps; ++r) {
          out.append(r > 0 ? ", " : "").append(String.format(Locale.ROOT, "%.2f", figures[c][r]));
        }
        out.append(']');
      }
      System.out.println(out.append('}'));
    }
  }
}
