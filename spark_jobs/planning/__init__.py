"""Planning shared by the rewrite jobs: file size bounds and bin packing of files into groups."""
