"""What the CPU and the CUDA renderers (codegen/cpu/, codegen/cuda/) share:

emit.py        Python lines that compute an expression at an index, for Numba and Numba-CUDA alike
views.py       a chain of layout reads over a buffer as an offset and strides
extern.py      matmul stages split for a library matmul: prologue pass, library call, epilogue pass
tiles.py       the GPU's shared-memory matmul tiles (the 2-D matmul stage and the batched one)
batched.py     a batched matmul stage, one matmul per batch index
grouped.py     a grouped matmul stage, each expert's rows times its matrix
put_along.py   a put_along's scatter stage
"""
