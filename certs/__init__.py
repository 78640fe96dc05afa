"""TLS for the admission webhook: issue a CA and serving certificate, write them, install them.

The kube-apiserver only calls webhooks over HTTPS and trusts exactly the `caBundle` written into
each webhook configuration, so the webhook cannot start serving before these exist. `issue` and
`renewal` are pure; `files` and `cluster` are the only modules that touch the disk or the API.
"""
