"""The runners' demand the web tier publishes for their autoscaling
(server/placement/demand.py), into CloudWatch as moto keeps it."""
import asyncio

import boto3
import pytest
from moto import mock_aws

from server.placement.demand import CAP, METRIC, Publisher, demand
from server.placement.registry import Registered


def runner(busy, capacity):
    return Registered(f"r{busy}-{capacity}", "ws://10.0.0.5:8790", capacity, busy)


def test_demand_is_what_is_held_and_waits_over_what_the_runners_hold():
    assert demand([runner(30, 100), runner(10, 100)], 0) == 20.0
    assert demand([runner(90, 100)], 30) == 120.0  # a class waits: over 100, scale out
    assert demand([], 0) == 0.0  # nobody, no runner: nothing to scale
    assert demand([], 5) == CAP  # some wait and there is no runner at all
    assert demand([runner(100, 100)], 10_000) == CAP


@pytest.fixture
def aws(monkeypatch):
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "eu-west-1")):
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.client("cloudwatch")


def test_each_worker_puts_the_demand_into_its_namespace_every_minute_and_goes_on_after_a_failure(aws, monkeypatch):
    import server.placement.demand as published
    monkeypatch.setattr(published, "PUBLISH_SECONDS", 0.01)
    publisher = Publisher("PyClassroom/test-stack", aws)
    calls = {"n": 0}

    async def alive():
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("the database is away")  # that minute is skipped, the next one goes on
        return [runner(45, 100)]

    async def go():
        task = asyncio.ensure_future(publisher.publish(alive, lambda: 5))
        while calls["n"] < 4:
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    asyncio.run(go())
    assert {m["MetricName"] for m in aws.list_metrics(Namespace="PyClassroom/test-stack")["Metrics"]} == {METRIC}
    import datetime
    now = datetime.datetime.now(datetime.timezone.utc)
    stats = aws.get_metric_statistics(Namespace="PyClassroom/test-stack", MetricName=METRIC,
                                      StartTime=now - datetime.timedelta(minutes=5), EndTime=now + datetime.timedelta(minutes=1),
                                      Period=60, Statistics=["Average", "SampleCount"])["Datapoints"]
    assert sum(d["SampleCount"] for d in stats) >= 2 and all(d["Average"] == 50.0 for d in stats), stats
