package org.kvstore.scalaapi

/** An immutable array shape: `Shape(2, 3)`. */
final class Shape private (private val dims: Vector[Int]) {
  /** Dimension i. */
  def apply(i: Int): Int = dims(i)

  /** Number of dimensions. */
  def length: Int = dims.length

  /** Number of elements (1 for a scalar). */
  def product: Int = dims.product

  def toArray: Array[Int] = dims.toArray

  def toVector: Vector[Int] = dims

  private[scalaapi] def toJava: org.kvstore.Shape = org.kvstore.Shape.of(dims: _*)

  override def equals(o: Any): Boolean = o match {
    case s: Shape => s.dims == dims
    case _ => false
  }

  override def hashCode: Int = dims.hashCode

  override def toString: String = dims.mkString("(", ",", ")")
}

object Shape {
  def apply(dims: Int*): Shape = {
    require(dims.forall(_ >= 0), s"negative dimension in shape ${dims.mkString("(", ",", ")")}")
    new Shape(dims.toVector)
  }

  private[scalaapi] def fromJava(s: org.kvstore.Shape): Shape = new Shape(s.toIntArray.toVector)
}
