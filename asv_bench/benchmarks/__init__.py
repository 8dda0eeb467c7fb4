"""asv benchmarks of kerneltools (run from ``asv_bench/``; see ``asv.conf.json``)."""
