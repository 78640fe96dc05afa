"""Who asks the webhook, for the security tests: every identity that is not the controller's, the
names made to look like its own, and the gated member they would ungate."""

from gangkeeper import names
from tests.webhook.builders import NAMESPACE, pod

CONTROLLER = names.DEFAULT_CONTROLLER_USERNAME


def gated() -> dict:
    return pod("bert-worker-0", gpus=8, labels={names.GROUP_LABEL: "bert"},
               gates=["example.com/other", names.SCHEDULING_GATE])


WHO = [
    ("a user", "alice@example.com", ["system:authenticated"]),
    ("the training operator's service account", f"system:serviceaccount:{NAMESPACE}:training-operator",
     ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"]),
    ("a service account named like the controller in the user's namespace",
     f"system:serviceaccount:{NAMESPACE}:gangkeeper-controller",
     ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"]),
    ("another service account of gangkeeper's own namespace", "system:serviceaccount:gangkeeper:default",
     ["system:serviceaccounts", "system:serviceaccounts:gangkeeper", "system:authenticated"]),
    ("a namespace admin (RoleBinding to admin through a group)", "bob@example.com",
     ["system:authenticated", "oidc:ml-training-admins"]),
    ("a cluster admin", "kubernetes-admin", ["system:masters", "system:authenticated"]),
    ("the kube-controller-manager", "system:kube-controller-manager", ["system:authenticated"]),
    ("anonymous", "system:anonymous", ["system:unauthenticated"]),
    ("nobody named", "", []),
]

LOOKALIKES = [
    ("a suffix", CONTROLLER + "2"),
    ("a longer name on the same prefix", CONTROLLER + "-evil"),
    ("a prefix only", CONTROLLER[:-1]),
    ("upper case", CONTROLLER.upper()),
    ("one capital", CONTROLLER.replace("controller", "Controller")),
    ("a trailing space", CONTROLLER + " "),
    ("a leading space", " " + CONTROLLER),
    ("a trailing newline", CONTROLLER + "\n"),
    ("a trailing NUL", CONTROLLER + "\x00"),
    ("a Cyrillic е for e", CONTROLLER.replace("gangkeeper-", "gangkееper-")),
    ("a zero-width space", CONTROLLER.replace("gangkeeper:", "gangkeeper:\u200b")),
    ("another namespace", "system:serviceaccount:gangkeeper2:gangkeeper-controller"),
    ("a service account group named like it", "system:serviceaccounts:gangkeeper"),
]
