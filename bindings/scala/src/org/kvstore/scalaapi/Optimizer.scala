package org.kvstore.scalaapi

import org.kvstore.{Optimizer => JOptimizer}

/**
 * A built-in optimizer (a facade over org.kvstore.Optimizer), accepted by
 * `KVStore.setOptimizer`, as the reference's `org.apache.mxnet.optimizer` classes:
 * `kv.setOptimizer(new SGD(learningRate = 0.1f, momentum = 0.9f))`.
 *
 * A number left at its default (`Double.NaN`, which no parameter accepts) and a flag left at
 * its default (`false`; `lazyUpdate`: `true`) are not given: the library's default applies
 * (docs/OPTIMIZERS.md). `SGD` and `Adam` take `lazyUpdate`: a row_sparse push updates only
 * its rows of the weight and of the optimizer state; `lazyUpdate = false` applies it densely,
 * so weight decay and momentum move every row ("Row-sparse gradients: lazy updates"); like
 * the reference's NAG, AdaGrad and RMSProp, the other classes do not have it. A Float argument
 * is widened to Double (0.1f is 0.10000000149011612; the library rounds these
 * hyper-parameters to float32 anyway). The library checks the parameters at construction: a
 * value out of range throws org.kvstore.KVInvalidArgumentException with its message.
 */
abstract class Optimizer(name: String, numbers: Seq[(String, Double)], flags: Seq[(String, Boolean)],
                         flagsOnByDefault: Seq[(String, Boolean)] = Nil) {
  val java: JOptimizer = {
    val withNumbers = numbers.foldLeft(JOptimizer.of(name)) {
      case (o, (param, v)) => if (v.isNaN) o else o.set(param, v)
    }
    // flags are given when true, flagsOnByDefault when false (each only off its default).
    val withOnFlags = flagsOnByDefault.foldLeft(withNumbers) {
      case (o, (param, v)) => if (v) o else o.set(param, false)
    }
    flags.foldLeft(withOnFlags) { case (o, (param, v)) => if (v) o.set(param, true) else o }
  }

  /** The spec string, e.g. "sgd(learning_rate=0.1,momentum=0.9)". */
  def spec: String = java.spec()

  override def toString: String = spec

  override def equals(other: Any): Boolean = other match {
    case o: Optimizer => o.spec == spec
    case _ => false
  }

  override def hashCode: Int = spec.hashCode
}

private object Optimizer {
  // The parameters sgd and nag share, in spec order.
  def momentumParams(learningRate: Double, momentum: Double, wd: Double, rescaleGrad: Double,
                     clipGradient: Double): Seq[(String, Double)] =
    Seq("learning_rate" -> learningRate, "momentum" -> momentum, "wd" -> wd,
        "rescale_grad" -> rescaleGrad, "clip_gradient" -> clipGradient)
}

class SGD(learningRate: Double = Double.NaN, momentum: Double = Double.NaN, wd: Double = Double.NaN,
          rescaleGrad: Double = Double.NaN, clipGradient: Double = Double.NaN,
          multiPrecision: Boolean = false, lazyUpdate: Boolean = true)
    extends Optimizer("sgd", Optimizer.momentumParams(learningRate, momentum, wd, rescaleGrad, clipGradient),
                      Seq("multi_precision" -> multiPrecision), Seq("lazy_update" -> lazyUpdate))

class NAG(learningRate: Double = Double.NaN, momentum: Double = Double.NaN, wd: Double = Double.NaN,
          rescaleGrad: Double = Double.NaN, clipGradient: Double = Double.NaN,
          multiPrecision: Boolean = false)
    extends Optimizer("nag", Optimizer.momentumParams(learningRate, momentum, wd, rescaleGrad, clipGradient),
                      Seq("multi_precision" -> multiPrecision))

class Adam(learningRate: Double = Double.NaN, beta1: Double = Double.NaN, beta2: Double = Double.NaN,
           epsilon: Double = Double.NaN, wd: Double = Double.NaN, rescaleGrad: Double = Double.NaN,
           clipGradient: Double = Double.NaN, multiPrecision: Boolean = false, lazyUpdate: Boolean = true)
    extends Optimizer("adam", Seq("learning_rate" -> learningRate, "beta1" -> beta1, "beta2" -> beta2,
                                  "epsilon" -> epsilon, "wd" -> wd, "rescale_grad" -> rescaleGrad,
                                  "clip_gradient" -> clipGradient),
                      Seq("multi_precision" -> multiPrecision), Seq("lazy_update" -> lazyUpdate))

class AdaGrad(learningRate: Double = Double.NaN, epsilon: Double = Double.NaN, wd: Double = Double.NaN,
              rescaleGrad: Double = Double.NaN, clipGradient: Double = Double.NaN,
              multiPrecision: Boolean = false)
    extends Optimizer("adagrad", Seq("learning_rate" -> learningRate, "eps" -> epsilon, "wd" -> wd,
                                     "rescale_grad" -> rescaleGrad, "clip_gradient" -> clipGradient),
                      Seq("multi_precision" -> multiPrecision))

class RMSProp(learningRate: Double = Double.NaN, gamma1: Double = Double.NaN, gamma2: Double = Double.NaN,
              epsilon: Double = Double.NaN, centered: Boolean = false, clipWeights: Double = Double.NaN,
              wd: Double = Double.NaN, rescaleGrad: Double = Double.NaN, clipGradient: Double = Double.NaN,
              multiPrecision: Boolean = false)
    extends Optimizer("rmsprop", Seq("learning_rate" -> learningRate, "gamma1" -> gamma1, "gamma2" -> gamma2,
                                     "epsilon" -> epsilon, "clip_weights" -> clipWeights, "wd" -> wd,
                                     "rescale_grad" -> rescaleGrad, "clip_gradient" -> clipGradient),
                      Seq("centered" -> centered, "multi_precision" -> multiPrecision))

/** `w += rescaleGrad * g` (exact, also for integer weights). */
class Test(rescaleGrad: Double = Double.NaN, multiPrecision: Boolean = false)
    extends Optimizer("test", Seq("rescale_grad" -> rescaleGrad), Seq("multi_precision" -> multiPrecision))
