#!/usr/bin/python3
"""Derives the coefficients of plugins/cpu/vector_erf.h's erfc polynomials and prints them.

erfc(z) for 0 <= z <= Z is written t P(s) exp(-z^2) with t = 1 / (1 + z/2) in [t0, 1],
t0 = 1 / (1 + Z/2), and s = 2 (t - t0) / (1 - t0) - 1 in [-1, 1]; P is the least-squares
Chebyshev fit of erfc(z) exp(z^2) / t on 600 Chebyshev nodes (values from mpmath at 30 digits),
converted to powers of s for Horner's rule. Two fits are used:

  double (erf, the erf op):           Z = 12,   degree 13 (s = (7t - 4) / 3)
  f32 (gelu and gelu_backward):       Z = 10.5, degree 10 (--f32: coefficients rounded to f32)

Prints the coefficients (constant term first) and the largest relative error of the double
evaluation against mpmath on 4,000 points of [0, Z].

    /usr/bin/python3 tools/fit_erfc.py         # needs python3-numpy and python3-mpmath
    /usr/bin/python3 tools/fit_erfc.py --f32
"""
import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 30
NODES = 600


def fit(z_max, degree, f32):
    t_min = 1 / (1 + z_max / 2)

    def s_of(t):
        return 2 * (t - t_min) / (1 - t_min) - 1

    k = np.arange(NODES)
    s_nodes = np.cos(np.pi * (k + 0.5) / NODES)
    t_nodes = t_min + (s_nodes + 1) * (1 - t_min) / 2
    g = [float(mp.erfc(mp.mpf(2 / t - 2)) * mp.exp(mp.mpf(2 / t - 2) ** 2) / t) for t in t_nodes]
    powers = np.polynomial.chebyshev.cheb2poly(np.polynomial.chebyshev.chebfit(s_nodes, g, degree))
    if f32:
        powers = powers.astype(np.float32).astype(np.float64)
    worst = 0.0
    for z in np.concatenate([np.linspace(0, 3, 3000), np.linspace(3, z_max, 1000)]):
        t = 1 / (1 + z / 2)
        acc = 0.0
        for a in powers[::-1]:
            acc = acc * s_of(t) + a
        exact = mp.erfc(mp.mpf(z))
        worst = max(worst, abs(float((mp.mpf(t * acc * np.exp(-z * z)) - exact) / exact)))
    for a in powers:
        print(f"{a:.9g}f," if f32 else f"{a:.17g},")
    print(f"// largest relative error on [0, {z_max:g}]: {worst:.2g}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--f32"]:
        fit(10.5, 10, True)
    else:
        fit(12.0, 13, False)
