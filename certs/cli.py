"""`gangkeeper certs issue|install`: flags, their environment defaults, and their validation.

Every flag defaults from a GANGKEEPER_CERTS_* variable so that the same image runs as a Job or
an init container configured by `env:` alone; `--help` lists each variable beside its flag.
"""

import argparse
import datetime
import ipaddress
import os
import re
import sys
from pathlib import Path
from typing import Any

from gangkeeper import names
from gangkeeper.certs.files import CA_CRT, TLS_CRT, TLS_KEY, write_certs
from gangkeeper.certs.install import ClusterError, Target, install
from gangkeeper.certs.issue import DAYS_RANGE, issue
from gangkeeper.certs.renewal import DEFAULT_RENEW_BEFORE_FRACTION
from gangkeeper.cli import CommandError, credentials_problem, one_line
from gangkeeper.config import add_flag, int_in_range

ENV_PREFIX = "GANGKEEPER_CERTS_"
DEFAULT_DAYS = 365

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

DESCRIPTION = """\
The TLS certificate the API server checks when it calls gangkeeper's webhook.

  install  what the cluster runs (deploy/ runs it as an init container of the webhook):
           keep a CA and a serving certificate for the webhook's Service in a
           kubernetes.io/tls Secret, issue them when missing and renew them when due,
           put the CA in the caBundle of both webhook configurations, and write the
           files the webhook serves with to --dir.
  issue    write a new CA, certificate and key to a directory, for a webhook run by
           hand (gangkeeper webhook --cert-dir DIR) or for `certs install` to use.

Every flag can also be set by an environment variable, GANGKEEPER_CERTS_<FLAG>
(`gangkeeper certs install --help` lists them).
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `certs` with its two subcommands on the `gangkeeper` command."""
    parser = subparsers.add_parser("certs", help="issue and install the webhook's TLS certificates",
                                   description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="certs_command", metavar="COMMAND", required=True)

    issue_parser = commands.add_parser(
        "issue", help="write a new CA, serving certificate and key to a directory",
        description=f"Write a new CA ({CA_CRT}), a serving certificate for the webhook's Service ({TLS_CRT}) and "
                    f"its key ({TLS_KEY}, mode 0600) to --out. Nothing in the cluster changes: serve them with "
                    f"`gangkeeper webhook --cert-dir`, or install them with `gangkeeper certs install`.")
    _flag(issue_parser, "--out", "directory to write ca.crt, tls.crt and tls.key (mode 0600) to", type=Path,
          default=None, required=True)
    _flag(issue_parser, "--service", "name of the webhook's Service", type=dns_label, default=names.WEBHOOK_SERVICE)
    _flag(issue_parser, "--namespace", "namespace of the Service", type=dns_label, default=names.DEFAULT_NAMESPACE)
    _flag(issue_parser, "--dns", "extra DNS names for the certificate (beyond the Service's), comma-separated; "
          "repeatable",
          type=dns_names, default=None, action="extend")
    _flag(issue_parser, "--ip", "IP addresses for the certificate (none unless given), comma-separated; "
          "repeatable",
          type=ip_addresses, default=None, action="extend")
    _flag(issue_parser, "--days", "validity in days", type=days, default=DEFAULT_DAYS)
    issue_parser.set_defaults(run=run_issue)

    install_parser = commands.add_parser(
        "install", help="issue when missing or due, then patch both caBundles and write the TLS Secret",
        description="Make the cluster trust the webhook: keep its certificate in the TLS Secret (issued when "
                    "missing, renewed when due or when it does not name the Service), put its CA in the caBundle "
                    "of both webhook configurations, and write the files to --dir. Run again at any time: what is "
                    "current is kept. Credentials: --kubeconfig, else the pod's service account, else "
                    "$KUBECONFIG or ~/.kube/config.")
    _flag(install_parser, "--dir", "directory that receives the installed files; read when the Secret "
          "holds none, so that certificates made by `certs issue` can be installed", type=Path,
          default=None, required=True)
    _flag(install_parser, "--namespace", "namespace of the Secret and the Service", type=dns_label,
          default=names.DEFAULT_NAMESPACE)
    _flag(install_parser, "--secret", "name of the kubernetes.io/tls Secret", type=dns_subdomain, default=names.WEBHOOK_TLS_SECRET)
    _flag(install_parser, "--service", "name of the webhook's Service, which the certificate must name",
          type=dns_label, default=names.WEBHOOK_SERVICE)
    _flag(install_parser, "--mutating", "name of the MutatingWebhookConfiguration", type=dns_subdomain,
          default=names.WEBHOOK_CONFIGURATION)
    _flag(install_parser, "--validating", "name of the ValidatingWebhookConfiguration", type=dns_subdomain,
          default=names.WEBHOOK_CONFIGURATION)
    _flag(install_parser, "--kubeconfig", "kubeconfig file; when unset: the pod's service account, "
          "else $KUBECONFIG or ~/.kube/config", default=None)
    _flag(install_parser, "--renew-before-fraction", "renew once less than this fraction of the lifetime is left",
          type=fraction, default=DEFAULT_RENEW_BEFORE_FRACTION)
    _flag(install_parser, "--days", "validity of newly issued certificates in days", type=days, default=DEFAULT_DAYS)
    install_parser.set_defaults(run=run_install)


def run_issue(args: argparse.Namespace) -> int:
    now = datetime.datetime.now(datetime.timezone.utc)
    issued = issue(args.service, args.namespace, now, args.days, tuple(args.dns or ()), tuple(args.ip or ()))
    try:
        write_certs(args.out, issued)
    except OSError as error:
        raise _unwritable(args.out, "--out", error) from None
    print(f"wrote {args.out}/ca.crt, tls.crt, tls.key for {args.service}.{args.namespace}.svc")
    return 0


def run_install(args: argparse.Namespace) -> int:
    from urllib3.exceptions import HTTPError

    # The client is loaded only by the one command that needs it, through the one module that imports it.
    from gangkeeper.certs.cluster import config, kubernetes_cluster

    target = Target(namespace=args.namespace, secret=args.secret, service=args.service, mutating=args.mutating,
                    validating=args.validating, days=args.days, renew_before_fraction=args.renew_before_fraction)
    _check_writable(args.dir)  # before the cluster is changed, not after
    try:
        cluster = kubernetes_cluster(args.kubeconfig)
    except (config.ConfigException, OSError) as error:
        raise credentials_problem(args.kubeconfig, "--kubeconfig", f"{ENV_PREFIX}KUBECONFIG", error) from None
    try:
        report = install(cluster, target, args.dir, datetime.datetime.now(datetime.timezone.utc))
    except ClusterError as err:
        print(f"gangkeeper certs install: {err}", file=sys.stderr)
        return 1
    except HTTPError as error:  # no answer at all: the server named in the kubeconfig is not there
        raise CommandError(f"cannot reach the API server ({one_line(_reason(error))}); check that the cluster is up "
                           f"and --kubeconfig (env {ENV_PREFIX}KUBECONFIG) names it") from None
    except OSError as error:
        raise _unwritable(args.dir, "--dir", error) from None
    print("\n".join(report))
    return 0


def _reason(error: Exception) -> object:
    """urllib3's innermost reason (MaxRetryError wraps the connection error that says what happened)."""
    return getattr(error, "reason", None) or error


def _check_writable(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as error:
        raise _unwritable(directory, "--dir", error) from None


def _unwritable(directory: Path, flag: str, error: OSError) -> CommandError:
    variable = ENV_PREFIX + flag.lstrip("-").upper()
    return CommandError(f"cannot write to {directory}: {one_line(error.strerror or error)}; pass a directory you "
                        f"can write with {flag} (env {variable})")


def _flag(parser: argparse.ArgumentParser, flag: str, text: str, *, required: bool = False, **kwargs: Any) -> None:
    """`config.add_flag` under the GANGKEEPER_CERTS_ prefix; a required flag is optional once its variable is set."""
    variable = ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()
    add_flag(parser, flag, help=text, env=variable, required=required and variable not in os.environ, **kwargs)


def dns_label(value: str) -> str:
    """A Service or namespace name: an RFC 1123 label."""
    if not _DNS_LABEL.match(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a DNS label: use at most 63 lowercase letters, digits and '-', "
            f"starting and ending with a letter or digit")
    return value


def dns_subdomain(value: str) -> str:
    """An object name or an extra host name: an RFC 1123 subdomain."""
    if len(value) > 253 or not all(_DNS_LABEL.match(label) for label in value.split(".")):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a DNS name: use dot-separated labels of lowercase letters, digits and '-', "
            f"at most 253 characters in all")
    return value


def dns_names(value: str) -> list[str]:
    """Comma-separated DNS names, so that one environment variable can hold several."""
    return [dns_subdomain(name.strip()) for name in value.split(",") if name.strip()]


def ip_addresses(value: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Comma-separated IPv4 or IPv6 addresses."""
    addresses = []
    for text in filter(None, (part.strip() for part in value.split(","))):
        try:
            addresses.append(ipaddress.ip_address(text))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an IP address: write one like 10.96.0.10 or fd00::10") from None
    return addresses


days = int_in_range(*DAYS_RANGE, "a validity in days")


def fraction(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a fraction strictly between 0 and 1, such as 0.33")
    return number
