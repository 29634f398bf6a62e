package org.kvstore;

import java.util.Arrays;

/** An immutable array shape. */
public final class Shape {
  private final long[] dims;

  private Shape(long[] dims) {
    for (long d : dims) {
      if (d < 0) throw new KVInvalidArgumentException("negative dimension in shape " + Arrays.toString(dims));
    }
    this.dims = dims;
  }

  /** A shape from int dims, e.g. {@code Shape.of(2, 3)}. */
  public static Shape of(int... dims) {
    long[] d = new long[dims.length];
    for (int i = 0; i < dims.length; ++i) d[i] = dims[i];
    return new Shape(d);
  }

  /** A shape from long dims. */
  public static Shape of(long... dims) {
    return new Shape(dims.clone());
  }

  /** Number of dimensions. */
  public int ndim() {
    return dims.length;
  }

  /** Dimension i. */
  public long get(int i) {
    return dims[i];
  }

  /** Number of elements (1 for a scalar). */
  public long size() {
    long n = 1;
    for (long d : dims) n *= d;
    return n;
  }

  /** A copy of the dims. */
  public long[] toArray() {
    return dims.clone();
  }

  /** The dims as ints (each must fit). */
  public int[] toIntArray() {
    int[] r = new int[dims.length];
    for (int i = 0; i < dims.length; ++i) r[i] = Math.toIntExact(dims[i]);
    return r;
  }

  long[] dimsNoCopy() {
    return dims;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Shape && Arrays.equals(((Shape) o).dims, dims);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(dims);
  }

  @Override
  public String toString() {
    StringBuilder sb = new StringBuilder("(");
    for (int i = 0; i < dims.length; ++i) {
      if (i > 0) sb.append(',');
      sb.append(dims[i]);
    }
    return sb.append(')').toString();
  }
}
