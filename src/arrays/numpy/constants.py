"""Constants of the Array API / NumPy namespace."""
import math

__all__ = ["e", "inf", "nan", "newaxis", "pi", "euler_gamma"]

e = math.e
inf = math.inf
nan = math.nan
pi = math.pi
euler_gamma = 0.5772156649015329
newaxis = None
