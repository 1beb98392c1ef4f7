"""The NCZarr/Zarr v2 format itself: dtypes (Appendix E), attributes (Appendix D), flavor detection,
the reader, the writer, chunk selection and consolidated metadata.

Everything that knows how a netCDF-4 dataset is laid out as Zarr objects lives here and nowhere
else. May import the ground floor and ``stores`` (it reads and writes through the Store
interface); never ``sources``, ``conversion`` or anything above (docs/architecture.md).
"""
