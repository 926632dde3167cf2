"""Task data: readers, feature conversion, post-processing and metrics."""
