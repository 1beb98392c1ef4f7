"""netCDF-4/HDF5 input as the converter and ``nczarr-dump IN.nc`` read it: the netCDF4-python
adapter (netcdf4.py), the HDF5 look before netCDF4 opens a file (hdf5_types.py), the HDF5 chunk
index that lets compressed chunks be copied as they are (hdf5_chunks.py), a dump's view of any
input (dump_source.py), and netcdf-c's readings of a fix's probes in a child process
(netcdf_c_readings.py).

May import ``nczarr``, ``stores`` and the ground floor; never the graded implementations or the matrix.
"""
