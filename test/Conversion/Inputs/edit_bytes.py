#!/usr/bin/env python3
"""Copies a file, replacing the one occurrence of bytes OLD by NEW of the
same length (an edit of an artifact's manifest in place, as a user with a
hex editor would make it).

  edit_bytes.py IN OUT OLD NEW
"""
import sys

source, target, old, new = sys.argv[1:5]
old, new = old.encode(), new.encode()
if len(old) != len(new):
    sys.exit("edit_bytes.py: OLD and NEW differ in length")
data = open(source, "rb").read()
if data.count(old) != 1:
    sys.exit("edit_bytes.py: %r occurs %d times in %s" % (old, data.count(old), source))
open(target, "wb").write(data.replace(old, new))
