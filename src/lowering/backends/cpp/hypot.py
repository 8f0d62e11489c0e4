"""``hypot`` correctly rounded, for the cpp backend's kernels (real ``hypot`` and complex ``abs``,
which the complex decomposition pass lowers to ``hypot``).

``st_hypot(x, y)`` returns ``sqrt(x^2 + y^2)`` rounded to nearest, ties to even, for every
input, subnormal results included; ``hypot(+-inf, NaN)`` is inf, other NaNs give NaN (C99).
The vector math library's ``hypot`` is within about an ulp, glibc's (NumPy's ``npy_hypot``) within
0.51 ulp and wrong on about half of the exact halfway cases (Pythagorean triples whose
hypotenuse needs one more bit), CPython's ``math.hypot`` on some of those and on subnormal results.

float64: the inputs are scaled by a power of two that brings the larger to [1, 4) (exact), so
nothing overflows or underflows in between. A Newton step from ``h = sqrt(a^2 + b^2)`` with the
residual ``a^2 + b^2 - h^2`` from exact squares (T. J. Dekker, "A floating-point technique for
extending the available precision", Numer. Math. 18, 1971: Veltkamp's split) and Knuth's TwoSum
gives the value within about 2**-100 relative; the candidate is that value rounded (to the
subnormal grid when both inputs are subnormal). The one doubt left is the side of the midpoint
``m`` between the candidate and its neighbour toward the value: the sign of ``a^2 + b^2 - m^2``,
a sum of seven doubles, is exact by summing them in three-fold working precision (S. M. Rump,
T. Ogita, S. Oishi, "Accurate floating-point summation part II: sign, K-fold faithful and rounding
to nearest", SIAM J. Sci. Comput. 31(2), 2008: SumK with K = 3; its error bound, about
2**-190 here, is far below the 2**-158 granularity of a nonzero sum, and a sum that is not
near zero only arises when the larger input dominates), zero meaning an exact tie.

float32: the squares and the midpoint's square are exact in double, so the sign of
``x^2 + y^2 - m^2`` is exact after one TwoSum.
"""

HELPERS = r"""
// ---- hypot, correctly rounded (src/lowering/backends/hypot.py) -----------------------------
// s + t == a + b exactly (Knuth's TwoSum).
ST_INLINE void st_two_sum(double a, double b, double &s, double &t) {
  s = a + b;
  const double bb = s - a;
  t = (a - (s - bb)) + (b - bb);
}
// p + q == a * a exactly (Dekker's product of Veltkamp halves; no over- / underflow inside).
ST_INLINE void st_two_sq(double a, double &p, double &q) {
  const double c = a * 134217729.0, hi = c - (c - a), lo = a - hi;
  p = a * a;
  q = ((hi * hi - p) + 2.0 * hi * lo) + lo * lo;
}
ST_INLINE double st_hypot(double x, double y) {
  const double ax = __builtin_fabs(x), ay = __builtin_fabs(y);
  const double big = ax > ay ? ax : ay, small = ax > ay ? ay : ax;
  const uint64_t e = st_dbits(big) >> 52;
  const uint64_t e0 = e < 1 ? 1 : (e > 2045 ? 2045 : e);
  const double sc = st_bitsd((2046 - e0) << 52), inv = st_bitsd(e0 << 52);
  const double a = big * sc, b = small * sc;           // a in [1, 4), or [2**-52, 1) if e == 0
  const double h = sqrt(a * a + b * b);
  double A, A2, B, B2, H, H2, S, E;
  st_two_sq(a, A, A2);
  st_two_sq(b, B, B2);
  st_two_sq(h, H, H2);
  st_two_sum(A, B, S, E);
  const double c = ((S - H) + ((E + A2) + (B2 - H2))) / (h + h);       // Newton step
  const double w = h + c;
  // the candidate on the result's grid: 2**-52 (scaled) below 1 when both inputs are subnormal
  const double yc = (e == 0 && w < 1.0) ? (w + 1.0) - 1.0 : w;
  const double dir = (h - yc) + c;                      // the value minus yc, nearly
  const uint64_t yb = st_dbits(yc);
  const double g = e == 0 ? 0x1p-52 : 0.0;
  const double up = st_bitsd(yb + 1) - yc, dn = yc - st_bitsd(yb - 1);
  const double delta = dir > 0 ? 0.5 * (up > g ? up : g) : -0.5 * (dn > g ? dn : g);
  // sign of a^2 + b^2 - (yc + delta)^2, exactly: seven terms, two error-free passes, a sum
  double Y, Y2;
  st_two_sq(yc, Y, Y2);
  double p0 = S - Y, p1 = E, p2 = A2, p3 = B2, p4 = -Y2, p5 = -2.0 * yc * delta;
  double p6 = -delta * delta;
  for (int k = 0; k < 2; ++k) {   // (unrolled by the compiler: named values, no array)
    st_two_sum(p1, p0, p1, p0);
    st_two_sum(p2, p1, p2, p1);
    st_two_sum(p3, p2, p3, p2);
    st_two_sum(p4, p3, p4, p3);
    st_two_sum(p5, p4, p5, p4);
    st_two_sum(p6, p5, p6, p5);
  }
  const double d = p6 + ((((p0 + p1) + p2) + (p3 + p4)) + p5);
  const double r0 = yc * inv, r1 = (yc + 2.0 * delta) * inv;
  // (selects on doubles: GCC 12 does not vectorise the same with bool variables)
  const double r = __builtin_fabs(d) < 0x1p-170 ? ((st_dbits(r0) & 1u) != 0 ? r1 : r0)
                                               : (d * dir > 0.0 ? r1 : r0);
  return (ax == __builtin_inf() || ay == __builtin_inf()) ? __builtin_inf()
      : ((x != x || y != y) ? x + y : (big == 0.0 ? 0.0 : r));
}
ST_INLINE float st_hypot(float x, float y) {
  const double X = __builtin_fabs((double)x), Y = __builtin_fabs((double)y);
  double S, E;
  st_two_sum(X * X, Y * Y, S, E);                     // the squares are exact
  const double h = sqrt(S);
  const float c = (float)h, yc = c > 0x1.fffffep127f ? 0x1.fffffep127f : c;
  const double dir = h - (double)yc;
  const uint32_t yb = st_fbits(yc);
  const double up = yb == 0x7f7fffffu ? 0x1p104 : (double)st_bitsf(yb + 1) - (double)yc;
  const double dn = (double)yc - (double)st_bitsf(yb - 1);
  const double delta = dir > 0 ? 0.5 * up : -0.5 * dn;
  const double m = (double)yc + delta;                 // 25 bits: m * m is exact
  const double d = (S - m * m) + E;                    // S - m*m is exact: d has the exact sign
  const float other = (float)(m + delta);
  const float r = d == 0.0 ? ((yb & 1u) ? other : yc)
                           : ((dir > 0 ? d > 0.0 : d < 0.0) ? other : yc);
  return (X == __builtin_inf() || Y == __builtin_inf()) ? __builtin_inff()
      : ((x != x || y != y) ? x + y : ((X == 0.0 && Y == 0.0) ? 0.0f : r));
}
"""
