"""A lone accelerator pod's min count is not read: the webhook says so (issue 14)."""

from gangkeeper import names
from gangkeeper.webhook.policy import Policy
from gangkeeper.webhook.review import parse_review
from gangkeeper.webhook.validate import validate
from tests.webhook.builders import pod, review

MIN = names.MIN_COUNT_ANNOTATION


def judged(obj):
    return validate(parse_review(review(obj)), Policy())


def test_min_count_on_a_lone_gpu_pod_is_a_warning_that_says_what_to_do():
    verdict = judged(pod("solo", gpus=1, annotations={MIN: "4"}))
    assert verdict.allowed
    assert verdict.warnings == (
        f"metadata.annotations[{MIN}] has no effect: with no group label and no owner gangkeeper knows, this pod "
        f"is a group of one (lone pod requesting nvidia.com/gpu); to schedule it with others, give each of them the "
        f"label {names.GROUP_LABEL}=NAME",)


def test_a_lone_gpu_pod_without_min_count_and_a_labelled_one_with_it_get_no_warning():
    assert judged(pod("solo", gpus=1)).warnings == ()
    assert judged(pod("p-0", gpus=1, labels={names.GROUP_LABEL: "g"}, annotations={MIN: "4"})).warnings == ()
