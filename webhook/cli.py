"""`gangkeeper webhook`: serve /mutate and /validate over HTTPS under gunicorn."""

import argparse
import logging
import os
import ssl
import sys

from gangkeeper import names
from gangkeeper.cli import CommandError, check_can_listen, one_line
from gangkeeper.config import add_flag, env_name, int_in_range, log_config, port, positive_int


def _names_list(text: str) -> tuple[str, ...]:
    """`a, b,c` → ('a', 'b', 'c')."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "webhook", help="run the admission webhook (labels and gates training pods)",
        description="Serve the mutating (/mutate) and validating (/validate) admission webhook over HTTPS, "
                    "plus /healthz, /readyz and /metrics. A rotated certificate in --cert-dir is picked up "
                    "without a restart.")
    add_flag(parser, "--bind", default="0.0.0.0", help="address to listen on")
    add_flag(parser, "--port", default=9443, type=port, help="HTTPS port")
    add_flag(parser, "--cert-dir", default="/etc/gangkeeper/tls",
             help="directory holding tls.crt and tls.key (a mounted kubernetes.io/tls Secret)")
    add_flag(parser, "--workers", default=2, type=int_in_range(1, 64, "a number of worker processes"),
             help="gunicorn worker processes")
    add_flag(parser, "--controller-username", default=names.DEFAULT_CONTROLLER_USERNAME,
             help="the only user allowed to remove the scheduling gate")
    add_flag(parser, "--audit-file", default="", help="audit log file, size-rotated; stdout when unset")
    add_flag(parser, "--excluded-namespaces", default=names.DEFAULT_NAMESPACE, type=_names_list,
             help="comma-separated namespaces whose pods are never gated")
    add_flag(parser, "--accelerators", default=", ".join(names.DEFAULT_ACCELERATORS), type=_names_list,
             help="comma-separated extended resources that make a pod a training pod (a trailing * matches a prefix)")
    add_flag(parser, "--max-body-bytes", default=3 * 2**20, type=positive_int,
             help="largest AdmissionReview body accepted")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _check_certificates(args.cert_dir)
    _check_audit_file(args.audit_file)
    check_can_listen(args.bind, args.port, "the webhook", "--port", env_name("--port"), "--bind")
    # Log lines to stderr, audit lines to stdout (or --audit-file): one stream per purpose.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s",
                        stream=sys.stderr)
    log_config("webhook", args)
    from gangkeeper.webhook import server  # Flask and gunicorn only for this subcommand

    app_config = {
        "EXCLUDED_NAMESPACES": args.excluded_namespaces,
        "ACCELERATORS": args.accelerators,
        "CONTROLLER_USERNAME": args.controller_username,
        "MAX_BODY_BYTES": args.max_body_bytes,
        "AUDIT_FILE": args.audit_file,
    }
    return server.serve(app_config, bind=args.bind, port=args.port, workers=args.workers, cert_dir=args.cert_dir)


def _check_certificates(cert_dir: str) -> None:
    """tls.crt and tls.key are in `cert_dir` and make a serving certificate, or a one-line CommandError."""
    where = f"pass the directory that holds them with --cert-dir (env {env_name('--cert-dir')})"
    make = f"write them with `gangkeeper certs issue --out {cert_dir}`, or {where}"
    if not os.path.isdir(cert_dir):
        raise CommandError(f"certificate directory {cert_dir} does not exist; {make}")
    missing = [name for name in ("tls.crt", "tls.key") if not os.path.isfile(os.path.join(cert_dir, name))]
    if missing:
        raise CommandError(f"no {' and no '.join(missing)} in {cert_dir}; {make}")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(os.path.join(cert_dir, "tls.crt"),
                                                                os.path.join(cert_dir, "tls.key"))
    except (OSError, ssl.SSLError) as error:
        raise CommandError(f"tls.crt and tls.key in {cert_dir} are not a certificate and its key "
                           f"({one_line(error)}); {make}") from None


def _check_audit_file(path: str) -> None:
    if not path:
        return
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "a"):
            pass
    except OSError as error:
        raise CommandError(f"cannot write the audit log {path}: {one_line(error.strerror or error)}; pass a file "
                           f"you can write with --audit-file (env {env_name('--audit-file')}), or none for "
                           f"stdout") from None
