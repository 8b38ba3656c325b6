"""``samsa cluster info``: the cluster at a glance, in four sections: Cluster (id, active
controller), Brokers (every registered broker: id, host:port, rack, fenced; DescribeCluster v2),
Quorum (the KRaft metadata quorum's leader, epoch, high watermark and each voter's and
observer's replication, as ``kafka-metadata-quorum describe --replication``; DescribeQuorum) and
Partitions (counts, and the under-replicated and offline partitions; Metadata). ``--json``
prints the same content as one document (``tools.cluster_report``). A quorum that cannot be read
(no leader within the time limit, no permission) is reported in its section, not as a failure
of the command.

``samsa cluster quorum [--status | --replication [--human-readable]]``: Kafka's
``kafka-metadata-quorum describe`` (``--status`` when neither is given); ``--json`` prints the
quorum document.

``samsa cluster start --config-dir DIR [--override key=value ...]``: run every
``node-<N>.properties`` of DIR as a broker process in the foreground (``tools.cluster_launcher``),
their output prefixed with ``[node-<id>]``; Ctrl-C or SIGTERM stops them all (exit code 0 when
every node stopped cleanly, 1 when one failed or exited by itself).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import KafkaError
from tools.admin_support import open_admin, usage_error, working
from tools.client_options import add_client_options
from tools.cluster_report import (
    info_document,
    quorum_document,
    render_info,
    render_replication,
    render_status,
)

if TYPE_CHECKING:
    from samsa.admin import AdminClient, QuorumInfo

__all__ = ["register"]


def register(groups: Any) -> None:
    cluster = groups.add_parser("cluster", help="describe the cluster")
    commands = cluster.add_subparsers(dest="command", metavar="COMMAND", required=True)
    info = commands.add_parser("info", help="cluster id, controller, brokers, quorum, partitions")
    add_client_options(info)
    info.set_defaults(handler=run_info)
    quorum = commands.add_parser("quorum", help="the KRaft metadata quorum "
                                 "(as kafka-metadata-quorum describe)")
    shown = quorum.add_mutually_exclusive_group()
    shown.add_argument("--status", action="store_true",
                       help="a summary of the quorum (the default)")
    shown.add_argument("--replication", action="store_true",
                       help="each voter's and observer's replication")
    quorum.add_argument("--human-readable", action="store_true",
                        help="with --replication: times as 'N ms ago'")
    add_client_options(quorum)
    quorum.set_defaults(handler=run_quorum)
    start = commands.add_parser("start", help="run a local cluster, one process per node")
    start.add_argument("--config-dir", type=Path, default=Path("conf/cluster"), metavar="DIR",
                       help="a directory of node-<N>.properties files (default: conf/cluster)")
    start.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config key on every node, over its file (repeatable)")
    start.set_defaults(handler=run_start)


def run_info(args: argparse.Namespace) -> int:
    with open_admin(args) as admin, working(args, "Describing the cluster"):
        cluster = admin.describe_cluster(include_fenced_brokers=True)
        quorum = _quorum_or_error(admin)
        partitions = admin.summarize_partitions()
    document = info_document(cluster, quorum, partitions)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        render_info(document, sys.stdout)
    return 0


def _quorum_or_error(admin: AdminClient) -> QuorumInfo | str:
    try:
        return admin.describe_quorum()
    except KafkaError as error:  # the other sections are still worth showing
        return f"{type(error).__name__}: {error}"


def run_quorum(args: argparse.Namespace) -> int:
    if args.human_readable and not args.replication:
        return usage_error(args, "--human-readable is only supported along with --replication")
    with open_admin(args) as admin, working(args, "Describing the metadata quorum"):
        document = quorum_document(admin.describe_quorum())
        cluster_id = None if args.replication else admin.describe_cluster().cluster_id
    if args.json:
        print(json.dumps(document, indent=2))
    elif args.replication:
        now_ms = int(time.time() * 1000) if args.human_readable else None
        render_replication(document, sys.stdout, now_ms=now_ms)
    else:
        render_status(cluster_id, document, sys.stdout)
    return 0


def run_start(args: argparse.Namespace) -> int:
    from tools.cluster_launcher import ClusterLauncher, ClusterStartError

    launcher = ClusterLauncher(args.config_dir, args.override)

    def on_signal(signum: int, _frame: object) -> None:
        launcher.request_stop()  # no lock here: the handler may interrupt a held one

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    try:
        launcher.start()
    except ClusterStartError as error:
        launcher.say(f"not started: {error}")
        return 1
    exited = launcher.wait()
    if exited is not None:
        launcher.say(f"node {exited.node_id} exited with code {exited.process.returncode}: "
                     "stopping the cluster")
    else:
        launcher.say("stopping the cluster")
    codes = launcher.stop()
    launcher.say("stopped: " + ", ".join(f"node {node} exit code {code}"
                                         for node, code in codes.items()))
    return 0 if exited is None and not any(codes.values()) else 1
