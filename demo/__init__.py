"""`gangkeeper demo`: two 32-GPU training jobs on a 48-GPU cluster, without and with gangkeeper.

Phase 1 runs the emulated cluster with the stock scheduler alone and shows the deadlock. Phase 2
runs the same workload with the real webhook (gunicorn over TLS) registered from the rendered
deploy/ manifests, and the real controller process talking to the emulated API over HTTP.
"""
