"""CDL, the text form of a dataset: the writer behind ``nczarr-dump`` (ncdump's output, byte for
byte), the parser of ncdump/ncgen CDL into the model, the text and time rules they share, and
the JSON dump.

May import ``sources`` (a dump's storage facts), ``nczarr`` and the ground floor.
"""
