package org.kvstore;

/**
 * IEEE 754 binary16 bit patterns, as float16 arrays exchange them with Java (short[]), to and
 * from float. The one half-float conversion of the JVM bindings: the Scala and Clojure layers
 * use it too. Every binary16 value is exact as a float; float to binary16 rounds to nearest
 * even, overflows to infinity and keeps NaN a NaN.
 */
public final class Float16 {
  private Float16() {}

  /** The float value of the bit pattern {@code bits}. */
  public static float toFloat(short bits) {
    int h = bits & 0xffff;
    int sign = (h & 0x8000) << 16;
    int exp = (h >>> 10) & 0x1f;
    int man = h & 0x3ff;
    if (exp == 0) { // zero or subnormal: man * 2^-24
      float f = man * 0x1p-24f;
      return sign != 0 ? -f : f;
    }
    if (exp == 31) return Float.intBitsToFloat(sign | 0x7f800000 | (man << 13)); // inf, NaN
    return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (man << 13));
  }

  /** The bit pattern nearest to {@code f} (ties to even). */
  public static short fromFloat(float f) {
    int x = Float.floatToRawIntBits(f);
    int sign = (x >>> 16) & 0x8000;
    int a = x & 0x7fffffff;
    if (a >= 0x7f800000) return (short) (sign | 0x7c00 | (a > 0x7f800000 ? 0x200 : 0));
    if (a >= 0x477ff000) return (short) (sign | 0x7c00); // rounds past 65504: infinity
    if (a < 0x38800000) { // below 2^-14: subnormal or zero
      if (a < 0x33000000) return (short) sign; // at most 2^-25: zero
      int e = a >>> 23;
      int m = (a & 0x7fffff) | 0x800000;
      int shift = 126 - e;
      int q = m >>> shift;
      int rem = m & ((1 << shift) - 1);
      int half = 1 << (shift - 1);
      if (rem > half || (rem == half && (q & 1) != 0)) ++q;
      return (short) (sign | q);
    }
    int h = (((a >>> 23) - 112) << 10) | ((a & 0x7fffff) >>> 13);
    int rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1) != 0)) ++h;
    return (short) (sign | h);
  }

  /** {@link #toFloat} of every element. */
  public static float[] toFloats(short[] bits) {
    float[] r = new float[bits.length];
    for (int i = 0; i < bits.length; ++i) r[i] = toFloat(bits[i]);
    return r;
  }

  /** {@link #fromFloat} of every element. */
  public static short[] fromFloats(float[] values) {
    short[] r = new short[values.length];
    for (int i = 0; i < values.length; ++i) r[i] = fromFloat(values[i]);
    return r;
  }
}
