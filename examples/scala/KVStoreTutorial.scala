// The Scala KVStore tutorial (shared/seeds/scala-kvstore.md) as a program: the tutorial's code
// with its import changed to org.kvstore.scalaapi, printing each `a.toArray` the way the
// tutorial shows it. The one other change: without GPUs, gpu(i) contexts run as cpu(i) (the
// library itself rightly refuses a GPU that is not there).
import org.kvstore.scalaapi._

object KVStoreTutorial {
  private def show(a: Array[Float]): Unit = println("Array[Float] = " + a.mkString("Array(", ", ", ")"))

  def main(args: Array[String]): Unit = {
    // ## Basic Push and Pull / Initialization
    val kv = KVStore.create("local") // create a local kv store.
    val shape = Shape(2,3)
    kv.init(3, NDArray.ones(shape)*2)
    val a = NDArray.zeros(shape)
    kv.pull(3, out = a)
    show(a.toArray)

    // ### Push, Aggregation, and Updater
    kv.push(3, NDArray.ones(shape)*8)
    kv.pull(3, out = a) // pull out the value
    show(a.toArray)

    val gpu = (i: Int) => if (i < Context.numGpus) Context.gpu(i) else Context.cpu(i)
    if (Context.numGpus < 4) Console.err.println(s"note: ${Context.numGpus} GPU(s); gpu(i) beyond them runs as cpu(i)")
    val gpus = Array(gpu(0), gpu(1), gpu(2), gpu(3))
    val b = Array(NDArray.ones(shape, gpus(0)), NDArray.ones(shape, gpus(1)),
                  NDArray.ones(shape, gpus(2)), NDArray.ones(shape, gpus(3)))
    kv.push(3, b)
    kv.pull(3, out = a)
    show(a.toArray)

    val updater = new MXKVStoreUpdater {
              override def update(key: Int, input: NDArray, stored: NDArray): Unit = {
                println(s"update on key $key")
                stored += input * 2
              }
              override def dispose(): Unit = {}
           }
    kv.setUpdater(updater)
    kv.pull(3, a)
    show(a.toArray)
    kv.push(3, NDArray.ones(shape))
    kv.pull(3, a)
    show(a.toArray)

    // ### Pull
    {
      val b = Array(NDArray.ones(shape, gpus(0)), NDArray.ones(shape, gpus(1)),
                    NDArray.ones(shape, gpus(2)), NDArray.ones(shape, gpus(3)))
      kv.pull(3, outs = b)
      show(b(1).toArray)
    }

    // ## List Key-Value Pairs
    {
      val keys = Array(5, 7, 9)
      kv.init(keys, Array.fill(keys.length)(NDArray.ones(shape)))
      kv.push(keys, Array.fill(keys.length)(NDArray.ones(shape)))
      val b = Array.fill(keys.length)(NDArray.zeros(shape))
      kv.pull(keys, outs = b)
      show(b(1).toArray)
    }
    kv.dispose()
  }
}
