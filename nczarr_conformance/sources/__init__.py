"""netCDF-4/HDF5 input as the converter and ``nczarr-dump IN.nc`` read it: the netCDF4-python
adapter (netcdf4.py), the HDF5 look before netCDF4 opens a file (hdf5_types.py), the HDF5 chunk
index that lets compressed chunks be copied as they are (hdf5_chunks.py) and a dump's view of any
input (dump_source.py).

May import ``nczarr``, ``stores`` and the ground floor; never the graded implementations or the matrix.
"""
