// The Scala KVStore tutorial (shared/seeds/scala-kvstore.md), step by step, in Java.
// Prints what the tutorial prints. GPU contexts run as CPU contexts when no GPU is present.
//
//   java -Djava.library.path=<build dir> -cp kvstore.jar:<classes> KVStoreTutorial
import java.util.Arrays;
import org.kvstore.Context;
import org.kvstore.KVLibrary;
import org.kvstore.KVStore;
import org.kvstore.NDArray;
import org.kvstore.Shape;

public final class KVStoreTutorial {
  private KVStoreTutorial() {}

  private static void show(NDArray a) {
    float[] v = a.toFloatArray();
    StringBuilder sb = new StringBuilder("Array[Float] = Array(");
    for (int i = 0; i < v.length; ++i) sb.append(i > 0 ? ", " : "").append(v[i]);
    System.out.println(sb.append(')'));
  }

  /** gpu(i) where that GPU exists, else cpu(i): the library rightly refuses absent GPUs. */
  private static Context gpuOrCpu(int i) {
    return i < KVLibrary.gpuCount() ? Context.gpu(i) : Context.cpu(i);
  }

  public static void main(String[] args) {
    if (KVLibrary.gpuCount() < 4) {
      System.err.println("note: " + KVLibrary.gpuCount() + " GPU(s); gpu(i) beyond them runs as cpu(i)");
    }
    try (KVStore kv = KVStore.create("local")) {
      // Initialization
      Shape shape = Shape.of(2, 3);
      kv.init(3, NDArray.ones(shape).mul(2));
      NDArray a = NDArray.zeros(shape);
      kv.pull(3, a);
      show(a);

      // Push, aggregation and updater
      kv.push(3, NDArray.ones(shape).mul(8));
      kv.pull(3, a);
      show(a);

      Context[] gpus = {gpuOrCpu(0), gpuOrCpu(1), gpuOrCpu(2), gpuOrCpu(3)};
      NDArray[] b = new NDArray[gpus.length];
      for (int i = 0; i < gpus.length; ++i) b[i] = NDArray.ones(shape, gpus[i]);
      kv.push(3, b);
      kv.pull(3, a);
      show(a);

      kv.setUpdater((key, input, stored) -> {
        System.out.println("update on key " + key);
        try (NDArray twice = input.mul(2)) {
          stored.addInPlace(twice);
        }
      });
      kv.pull(3, a);
      show(a);
      kv.push(3, NDArray.ones(shape));
      kv.pull(3, a);
      show(a);

      // Pull into several devices
      for (int i = 0; i < gpus.length; ++i) b[i] = NDArray.ones(shape, gpus[i]);
      kv.pull(3, b);
      show(b[1]);

      // List key-value pairs
      int[] keys = {5, 7, 9};
      NDArray[] ones = new NDArray[keys.length];
      Arrays.setAll(ones, i -> NDArray.ones(shape));
      kv.init(keys, ones);
      kv.push(keys, ones);
      NDArray[] c = new NDArray[keys.length];
      Arrays.setAll(c, i -> NDArray.zeros(shape));
      kv.pull(keys, c);
      show(c[1]);
    }
  }
}
