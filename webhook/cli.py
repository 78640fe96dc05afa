"""`gangkeeper webhook`: serve /mutate and /validate over HTTPS under gunicorn."""

import argparse
import logging

from gangkeeper import names
from gangkeeper.config import add_flag, int_in_range, log_config, port, positive_int


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
    add_flag(parser, "--audit-file", default="", help="audit log file, rotated (empty: stdout)")
    add_flag(parser, "--excluded-namespaces", default=names.DEFAULT_NAMESPACE, type=_names_list,
             help="comma-separated namespaces whose pods are never gated")
    add_flag(parser, "--accelerators", default=",".join(names.DEFAULT_ACCELERATORS), type=_names_list,
             help="comma-separated extended resources that make a pod a training pod (a trailing * matches a prefix)")
    add_flag(parser, "--max-body-bytes", default=3 * 2**20, type=positive_int,
             help="largest AdmissionReview body accepted")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
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
