"""The runners' demand, published to CloudWatch for their autoscaling
(deploy/cloudformation.yaml scales the runner service to keep it near a
target): every PUBLISH_SECONDS, each web worker with CLOUDWATCH_NAMESPACE
set puts one datum,

    RunnerDemandPercent = 100 x (sandboxes on the runners + starts waiting
                                 in this worker's line) / the runners' capacity

the runners' part as their heartbeats say (registry.py), the same for
every worker, and the line's part this worker's own: a class waiting for
room, or no runner at all, reads far over 100 (capped at CAP) and scales
out. CloudWatch averages the workers' data, which the target tracks.
boto3 blocks: each put runs in a thread, its failures logged once until
one succeeds again.
"""
import asyncio
import logging
from typing import Any, Callable

from .registry import Registered

log = logging.getLogger(__name__)

METRIC = "RunnerDemandPercent"
PUBLISH_SECONDS = 60.0
CAP = 400.0  # no runner at all, and some wait: a number the target can act on


def demand(runners: list[Registered], waiting: int) -> float:
    """The percent above, from the runners alive and the starts waiting."""
    capacity = sum(runner.capacity for runner in runners)
    wanted = sum(runner.busy for runner in runners) + waiting
    if capacity == 0:
        return CAP if wanted else 0.0
    return min(CAP, round(100.0 * wanted / capacity, 1))


class Publisher:
    """Puts RunnerDemandPercent into `namespace` with a CloudWatch client
    (made with boto3 at the first put unless given)."""

    def __init__(self, namespace: str, client: Any = None) -> None:
        self.namespace = namespace
        self.client = client
        self.failing = False

    def put(self, value: float) -> None:
        """One datum. Blocking: call it in a thread."""
        if self.client is None:
            import boto3  # only where a server publishes (its task's role allows cloudwatch:PutMetricData)
            self.client = boto3.client("cloudwatch")
        self.client.put_metric_data(Namespace=self.namespace,
                                    MetricData=[{"MetricName": METRIC, "Value": value, "Unit": "Percent"}])

    async def publish(self, alive: Callable[[], Any], waiting: Callable[[], int]) -> None:
        """Every PUBLISH_SECONDS, for as long as the worker runs."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                value = demand(await alive(), waiting())
                await loop.run_in_executor(None, self.put, value)
                if self.failing:
                    log.info("the runners' demand reaches CloudWatch again")
                self.failing = False
            except Exception as e:  # botocore's errors, the database's: the next minute tries again
                if not self.failing:
                    log.warning("could not publish the runners' demand to CloudWatch (%s): %s", self.namespace, e)
                self.failing = True
            await asyncio.sleep(PUBLISH_SECONDS)
