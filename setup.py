"""Builds the C++ extension `starling._native` from native/ (pybind11).

The import package `starling` is the folder `src/` (see pyproject.toml, package-dir).
"""
from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import find_packages, setup

packages = ["starling"] + ["starling." + name for name in find_packages("src")]

ext_modules = [
    Pybind11Extension(
        "starling._native",
        sources=["native/module.cpp", "native/philox.cpp", "native/pool.cpp", "native/gemm.cpp",
                 "native/jacobi.cpp", "native/buffers.cpp", "native/flight_ring.cpp",
                 "native/mpi_calls.cpp"],
        include_dirs=["native"],
        cxx_std=17,
        extra_compile_args=["-O3", "-pthread", "-fno-math-errno"],  # errno of libm is never read,
        extra_link_args=["-pthread", "-ldl"],
    )
]

setup(packages=packages, ext_modules=ext_modules, cmdclass={"build_ext": build_ext})
