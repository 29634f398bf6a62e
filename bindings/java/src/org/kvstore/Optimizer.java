package org.kvstore;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A built-in optimizer with its parameters: the object form of a spec string
 * (docs/OPTIMIZERS.md), accepted by {@link KVStore#setOptimizer(Optimizer)}.
 *
 * <pre>{@code
 * store.setOptimizer(Optimizer.sgd().learningRate(0.1).momentum(0.9).wd(1e-4));
 * // the same as store.setOptimizer("sgd(learning_rate=0.1,momentum=0.9,wd=1.0E-4)")
 * }</pre>
 *
 * <p>Immutable: each parameter method returns a new Optimizer. Parameters not set keep the
 * library's defaults. Every step is checked by the library at once (by installing the spec on a
 * scratch "local" store), so a parameter the optimizer does not have, or a value out of its
 * range, throws {@link KVInvalidArgumentException} with the library's message where it is set,
 * never later in {@code setOptimizer}. The update rules run in the library; this class only
 * names them.
 */
public final class Optimizer {
  private final String name;
  private final Map<String, String> params; // spec parameter -> rendered value, in order set

  private Optimizer(String name, Map<String, String> params) {
    this.name = name;
    this.params = params;
  }

  /** The optimizer called {@code name} ("sgd", "nag", "adam", "adagrad", "rmsprop", "test"). */
  public static Optimizer of(String name) {
    if (name == null) throw new KVNullPointerException("optimizer name is null");
    return new Optimizer(name, new LinkedHashMap<>()).checked();
  }

  /** Stochastic gradient descent, optionally with momentum ("sgd"). */
  public static Optimizer sgd() {
    return of("sgd");
  }

  /** Nesterov accelerated gradient ("nag"). */
  public static Optimizer nag() {
    return of("nag");
  }

  /** Adam ("adam"). */
  public static Optimizer adam() {
    return of("adam");
  }

  /** AdaGrad ("adagrad"). */
  public static Optimizer adaGrad() {
    return of("adagrad");
  }

  /** RMSProp, plain or centred ("rmsprop"). */
  public static Optimizer rmsProp() {
    return of("rmsprop");
  }

  /** {@code w += rescale_grad * g} ("test"; exact, also for integer weights). */
  public static Optimizer test() {
    return of("test");
  }

  /** This optimizer with spec parameter {@code param} (its spec name, e.g. "learning_rate"). */
  public Optimizer set(String param, double value) {
    return with(param, Double.toString(value));
  }

  /** This optimizer with a 0-or-1 spec parameter ("centered", "multi_precision", "lazy_update"). */
  public Optimizer set(String param, boolean value) {
    return with(param, value ? "1" : "0");
  }

  public Optimizer learningRate(double v) {
    return set("learning_rate", v);
  }

  public Optimizer wd(double v) {
    return set("wd", v);
  }

  public Optimizer rescaleGrad(double v) {
    return set("rescale_grad", v);
  }

  /** Gradient clipping bound (sgd, nag, adam, rmsprop: 0 or less means off). */
  public Optimizer clipGradient(double v) {
    return set("clip_gradient", v);
  }

  public Optimizer momentum(double v) {
    return set("momentum", v);
  }

  public Optimizer beta1(double v) {
    return set("beta1", v);
  }

  public Optimizer beta2(double v) {
    return set("beta2", v);
  }

  /** adam's and rmsprop's epsilon, adagrad's eps. */
  public Optimizer epsilon(double v) {
    return set("epsilon", v);
  }

  public Optimizer gamma1(double v) {
    return set("gamma1", v);
  }

  public Optimizer gamma2(double v) {
    return set("gamma2", v);
  }

  public Optimizer centered(boolean v) {
    return set("centered", v);
  }

  public Optimizer clipWeights(double v) {
    return set("clip_weights", v);
  }

  /**
   * Whether a row_sparse push updates only its rows, of the weight and of the optimizer state
   * (sgd and adam; the library's default is true, as the reference's SGD and Adam): with false
   * the push is applied densely, so weight decay and momentum move every row
   * (docs/OPTIMIZERS.md, "Row-sparse gradients: lazy updates"). The other optimizers do not
   * have the parameter: setting it throws {@link KVInvalidArgumentException}, as for any
   * parameter an optimizer does not have.
   */
  public Optimizer lazyUpdate(boolean v) {
    return set("lazy_update", v);
  }

  /** float16 weights keep a float32 master copy (where the library supports it). */
  public Optimizer multiPrecision(boolean v) {
    return set("multi_precision", v);
  }

  /** The optimizer's name as given. */
  public String name() {
    return name;
  }

  /** The parameters set, by spec name, with their rendered values. */
  public Map<String, String> params() {
    return Collections.unmodifiableMap(params);
  }

  /** The spec string, e.g. "sgd(learning_rate=0.1,momentum=0.9)". */
  public String spec() {
    if (params.isEmpty()) return name;
    StringBuilder sb = new StringBuilder(name).append('(');
    String sep = "";
    for (Map.Entry<String, String> p : params.entrySet()) {
      sb.append(sep).append(p.getKey()).append('=').append(p.getValue());
      sep = ",";
    }
    return sb.append(')').toString();
  }

  @Override
  public String toString() {
    return spec();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Optimizer && ((Optimizer) o).spec().equals(spec());
  }

  @Override
  public int hashCode() {
    return spec().hashCode();
  }

  private Optimizer with(String param, String value) {
    if (param == null) throw new KVNullPointerException("optimizer parameter name is null");
    Map<String, String> next = new LinkedHashMap<>(params);
    next.put(param, value); // setting a parameter again replaces its value
    return new Optimizer(name, next).checked();
  }

  /** This, once the library accepted its spec. */
  private Optimizer checked() {
    try (KVStore scratch = KVStore.create("local")) {
      scratch.setOptimizer(spec());
    }
    return this;
  }
}
