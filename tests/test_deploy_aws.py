"""deploy/efs_throughput.py, deploy/set_process_mode.py and deploy/programs_run_on.py against moto's
AWS (EFS, CloudWatch, ECS) and botocore's Stubber (for update_file_system and CloudFormation,
which moto does not implement, and for exact request checks). No AWS
account or network is used."""
import datetime as dt
import io
import json
import os
import subprocess
import sys

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from deploy import efs_throughput as efs_tool
from deploy import programs_run_on as where_tool
from deploy import set_process_mode as ecs_tool

REGION = "eu-west-1"
FS = "fs-0123456789abcdef0"
UTC = dt.timezone.utc
RULE_MESSAGE = ("You have reached the maximum number of throughput mode changes or provisioned throughput "
                "value decreases. Wait until 2030-12-29T12:51:32Z UTC and try again.")


@pytest.fixture(autouse=True)
def fake_aws_environment(monkeypatch):
    """Fake credentials and a Region, so that nothing can reach a real account."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_CONFIG_FILE",
                 "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)


class FakeTime:
    """sleep() that only advances the clock, and records what was asked."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self):
        return self.now


def run_main(module, argv, **inject):
    out = io.StringIO()
    code = module.main(argv, out=out, **inject)
    return code, out.getvalue()


# --- efs_throughput: helpers -------------------------------------------------

def fs_description(mode="bursting", mibps=None, state="available", fs_id=FS, size=5 * 2 ** 30):
    """A describe_file_systems entry with every field the model requires."""
    description = {
        "OwnerId": "123456789012", "CreationToken": "pyclassroom", "FileSystemId": fs_id,
        "CreationTime": dt.datetime(2025, 1, 1, tzinfo=UTC), "LifeCycleState": state,
        "NumberOfMountTargets": 2, "SizeInBytes": {"Value": size}, "PerformanceMode": "generalPurpose",
        "Encrypted": True, "ThroughputMode": mode, "Tags": [],
    }
    if mibps is not None:
        description["ProvisionedThroughputInMibps"] = mibps
    return description


def stubbed_efs():
    client = boto3.client("efs", region_name=REGION)
    return client, Stubber(client)


def expect_describe(stubber, **state):
    stubber.add_response("describe_file_systems", {"FileSystems": [fs_description(**state)]},
                         expected_params={"FileSystemId": FS})


def expect_update(stubber, request, **state):
    stubber.add_response("update_file_system", fs_description(**state), expected_params=request)


# --- efs_throughput status (moto) ----------------------------------------------

@mock_aws
def test_status_prints_mode_size_and_metrics_from_cloudwatch():
    efs = boto3.client("efs", region_name=REGION)
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    fs_id = efs.create_file_system(CreationToken="t", ThroughputMode="provisioned",
                                   ProvisionedThroughputInMibps=64, Encrypted=True)["FileSystemId"]
    now = dt.datetime.now(UTC).replace(second=0, microsecond=0)
    dimension = [{"Name": "FileSystemId", "Value": fs_id}]

    def put(name, unit, *values):
        cloudwatch.put_metric_data(Namespace="AWS/EFS", MetricData=[
            {"MetricName": name, "Dimensions": dimension, "Value": value, "Unit": unit,
             "Timestamp": now - dt.timedelta(minutes=30 - i)} for i, value in enumerate(values)])

    put("BurstCreditBalance", "Bytes", 2 * 2 ** 40, 1 * 2 ** 40)  # 2 TiB, then 1 TiB
    put("PermittedThroughput", "Bytes/Second", 64 * 2 ** 20, 64 * 2 ** 20)
    put("MeteredIOBytes", "Bytes", 60 * 2 ** 20, 120 * 2 ** 20)  # per minute: 1 and 2 MiB/s
    put("ClientConnections", "Count", 3, 4)

    code, out = run_main(efs_tool, ["status", fs_id, "--hours", "3"], efs=efs, cloudwatch=cloudwatch)

    assert code == 0
    assert f"{fs_id}: provisioned 64 MiB/s, size 0 B, available" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "min 1.0 TiB" in lines["BurstCreditBalance"] and "max 2.0 TiB" in lines["BurstCreditBalance"]
    assert "last 1.0 TiB" in lines["BurstCreditBalance"]
    assert "avg 64.00 MiB/s" in lines["PermittedThroughput"]
    assert "min 1.00 MiB/s" in lines["MeteredIOBytes"] and "max 2.00 MiB/s" in lines["MeteredIOBytes"]
    assert "last 2.00 MiB/s" in lines["MeteredIOBytes"]
    assert "last 4 connections" in lines["ClientConnections"]
    assert "no datapoints in the last 3 h" in lines["PercentIOLimit"]


@mock_aws
def test_status_of_an_unknown_file_system_is_one_clear_line(capsys):
    efs = boto3.client("efs", region_name=REGION)
    code = efs_tool.main(["status", FS], efs=efs, cloudwatch=boto3.client("cloudwatch", region_name=REGION))
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and f"file system {FS} not found in {REGION}" in err


# --- efs_throughput set (Stubber) ----------------------------------------------

def test_set_provisioned_sends_the_exact_request_and_waits_until_available():
    efs, stubber = stubbed_efs()
    time_ = FakeTime()
    expect_describe(stubber, mode="bursting")
    expect_update(stubber, {"FileSystemId": FS, "ThroughputMode": "provisioned", "ProvisionedThroughputInMibps": 64.0},
                  mode="provisioned", mibps=64.0, state="updating")
    expect_describe(stubber, mode="provisioned", mibps=64.0, state="updating")
    expect_describe(stubber, mode="provisioned", mibps=64.0, state="available")
    with stubber:
        code, out = run_main(efs_tool, ["set", FS, "--mode", "provisioned", "--mibps", "64"],
                             efs=efs, sleep=time_.sleep, clock=time_.clock)
    assert code == 0, out
    stubber.assert_no_pending_responses()
    assert time_.sleeps == [5]  # one poll while it was "updating"
    assert "once every 24 hours" in out  # a mode change counts against the rule
    assert out.strip().splitlines()[-1].startswith(f"done: {FS}: provisioned 64 MiB/s")


def test_set_new_provisioned_figure_sends_no_mode():
    efs, stubber = stubbed_efs()
    expect_describe(stubber, mode="provisioned", mibps=64.0)
    expect_update(stubber, {"FileSystemId": FS, "ProvisionedThroughputInMibps": 128.0},
                  mode="provisioned", mibps=128.0)
    expect_describe(stubber, mode="provisioned", mibps=128.0)
    with stubber:
        code, out = run_main(efs_tool, ["set", FS, "--mode", "provisioned", "--mibps", "128"],
                             efs=efs, sleep=FakeTime().sleep)
    assert code == 0, out
    stubber.assert_no_pending_responses()
    assert "24 hours" not in out  # an increase is allowed any time


def test_set_elastic_sends_only_the_mode():
    efs, stubber = stubbed_efs()
    expect_describe(stubber, mode="provisioned", mibps=64.0)
    expect_update(stubber, {"FileSystemId": FS, "ThroughputMode": "elastic"}, mode="elastic")
    expect_describe(stubber, mode="elastic")
    with stubber:
        code, _ = run_main(efs_tool, ["set", FS, "--mode", "elastic"], efs=efs, sleep=FakeTime().sleep)
    assert code == 0
    stubber.assert_no_pending_responses()


def test_set_to_the_current_mode_changes_nothing():
    efs, stubber = stubbed_efs()
    expect_describe(stubber, mode="elastic")
    with stubber:
        code, out = run_main(efs_tool, ["set", FS, "--mode", "elastic"], efs=efs)
    assert code == 0 and "nothing to change" in out
    stubber.assert_no_pending_responses()


def test_24_hour_rule_is_reported_with_the_next_allowed_time_and_not_retried(capsys):
    efs, stubber = stubbed_efs()
    time_ = FakeTime()
    expect_describe(stubber, mode="provisioned", mibps=64.0)
    stubber.add_client_error("update_file_system", service_error_code="TooManyRequests",
                             service_message=RULE_MESSAGE, http_status_code=429,
                             expected_params={"FileSystemId": FS, "ThroughputMode": "bursting"})
    with stubber:
        code = efs_tool.main(["set", FS, "--mode", "bursting"], efs=efs, sleep=time_.sleep,
                             clock=time_.clock, out=io.StringIO())
    err = capsys.readouterr().err
    assert code == efs_tool.EXIT_TOO_SOON
    stubber.assert_no_pending_responses()
    assert time_.sleeps == []  # no retry loop
    assert err.count("\n") == 1
    assert "once every 24 hours" in err
    assert "next change is allowed at 2030-12-29 12:51:32 UTC" in err
    assert RULE_MESSAGE in err


def test_throttling_is_retried_with_backoff():
    efs, stubber = stubbed_efs()
    time_ = FakeTime()
    request = {"FileSystemId": FS, "ThroughputMode": "elastic"}
    expect_describe(stubber, mode="bursting")
    stubber.add_client_error("update_file_system", service_error_code="ThrottlingException",
                             service_message="Rate exceeded", http_status_code=429, expected_params=request)
    stubber.add_client_error("update_file_system", service_error_code="ThrottlingException",
                             service_message="Rate exceeded", http_status_code=429, expected_params=request)
    expect_update(stubber, request, mode="elastic")
    expect_describe(stubber, mode="elastic")
    with stubber:
        code, out = run_main(efs_tool, ["set", FS, "--mode", "elastic"], efs=efs, sleep=time_.sleep,
                             clock=time_.clock)
    assert code == 0, out
    stubber.assert_no_pending_responses()
    assert len(time_.sleeps) == 2
    assert 0.5 <= time_.sleeps[0] <= 1.0 and 1.0 <= time_.sleeps[1] <= 2.0  # exponential, jittered
    assert out.count("AWS is throttling") == 2


def test_too_many_requests_that_is_a_rate_limit_is_retried():
    from botocore.exceptions import ClientError

    def error(message):
        return ClientError({"Error": {"Code": "TooManyRequests", "Message": message}}, "UpdateFileSystem")

    assert efs_tool.is_rate_limit(error("Rate exceeded"))
    assert not efs_tool.is_rate_limit(error(RULE_MESSAGE))
    assert efs_tool.is_24_hour_rule(error(RULE_MESSAGE))
    assert efs_tool.is_24_hour_rule(error(""))  # EFS documents TooManyRequests as the 24-hour rule


def test_next_change_allowed_reads_the_time_in_the_message():
    assert efs_tool.next_change_allowed(RULE_MESSAGE) == dt.datetime(2030, 12, 29, 12, 51, 32, tzinfo=UTC)
    assert efs_tool.next_change_allowed("You can make the next change after Fri Oct 25 17:30:11 UTC 2024") \
        == dt.datetime(2024, 10, 25, 17, 30, 11, tzinfo=UTC)
    assert efs_tool.next_change_allowed("Wait until 2030-01-02 03:04:05+02:00") \
        == dt.datetime(2030, 1, 2, 1, 4, 5, tzinfo=UTC)
    assert efs_tool.next_change_allowed("try again later") is None


def test_wrong_file_system_id_is_one_clear_line(capsys):
    efs, stubber = stubbed_efs()
    stubber.add_client_error("describe_file_systems", service_error_code="FileSystemNotFound",
                             service_message=f"File system '{FS}' does not exist.", http_status_code=404,
                             expected_params={"FileSystemId": FS})
    with stubber:
        code = efs_tool.main(["set", FS, "--mode", "elastic"], efs=efs, out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 1
    assert err == f"efs_throughput: error: file system {FS} not found in {REGION}: File system '{FS}' does not exist.\n"


def test_other_client_errors_show_their_message(capsys):
    efs, stubber = stubbed_efs()
    expect_describe(stubber, mode="bursting")
    stubber.add_client_error("update_file_system", service_error_code="InsufficientThroughputCapacity",
                             service_message="Not enough capacity in this Availability Zone.",
                             http_status_code=503)
    with stubber:
        code = efs_tool.main(["set", FS, "--mode", "provisioned", "--mibps", "100"], efs=efs,
                             sleep=FakeTime().sleep, out=io.StringIO())
    assert code == 1
    assert "InsufficientThroughputCapacity: Not enough capacity" in capsys.readouterr().err


def test_dry_run_sends_no_mutating_call():
    efs, stubber = stubbed_efs()
    expect_describe(stubber, mode="bursting")  # and nothing else: an update would fail the stub
    with stubber:
        code, out = run_main(efs_tool, ["set", FS, "--mode", "provisioned", "--mibps", "64", "--dry-run"], efs=efs)
    assert code == 0, out
    stubber.assert_no_pending_responses()
    assert f"now:  {FS}: bursting, size 5.0 GiB, available" in out
    assert ('request: update_file_system {"FileSystemId": "%s", "ProvisionedThroughputInMibps": 64.0, '
            '"ThroughputMode": "provisioned"}' % FS) in out
    assert f"aws efs update-file-system --file-system-id {FS} --throughput-mode provisioned " \
           "--provisioned-throughput-in-mibps 64" in out
    assert "dry run: nothing was sent" in out


def test_wait_is_bounded():
    efs, stubber = stubbed_efs()
    time_ = FakeTime()
    expect_describe(stubber, mode="bursting")
    expect_update(stubber, {"FileSystemId": FS, "ThroughputMode": "elastic"}, mode="elastic", state="updating")
    for _ in range(4):
        expect_describe(stubber, mode="elastic", state="updating")
    with stubber:
        code, _ = run_main(efs_tool, ["set", FS, "--mode", "elastic", "--wait-timeout", "15"], efs=efs,
                           sleep=time_.sleep, clock=time_.clock)
    assert code == efs_tool.EXIT_TIMEOUT
    assert sum(time_.sleeps) == 15


@pytest.mark.parametrize("argv", [
    ["--mode", "provisioned"],
    ["--mode", "provisioned", "--mibps", "0.5"],
    ["--mode", "provisioned", "--mibps", "3415"],
    ["--mode", "elastic", "--mibps", "64"],
    ["--mode", "bursting", "--mibps", "64"],
    ["--mode", "fast"],
])
def test_set_refuses_bad_arguments_before_calling_aws(argv):
    efs, stubber = stubbed_efs()
    with stubber, pytest.raises(SystemExit) as exit_:
        efs_tool.main(["set", FS, *argv], efs=efs, out=io.StringIO())
    assert exit_.value.code == 2


def test_mibps_limits_match_the_botocore_model():
    model = boto3.client("efs", region_name=REGION).meta.service_model
    shape = model.operation_model("UpdateFileSystem").input_shape.members["ProvisionedThroughputInMibps"]
    assert shape.metadata["min"] == efs_tool.MIBPS_MIN
    assert set(model.shape_for("ThroughputMode").enum) == set(efs_tool.MODES)


def test_clients_use_standard_retries_so_the_24_hour_rule_is_not_retried_by_botocore():
    efs, cloudwatch = efs_tool.make_clients(REGION)
    assert efs.meta.config.retries["mode"] == "standard"
    assert cloudwatch.meta.config.retries["mode"] == "standard"


# --- efs_throughput measure ----------------------------------------------------

class FakeBench:
    """Stands in for `python -m loadtest.efs_bench` (subprocess.run)."""

    def __init__(self, fail_on=None):
        self.commands = []
        self.fail_on = fail_on

    def __call__(self, command, **kwargs):
        self.commands.append((command, kwargs))
        if self.fail_on and self.fail_on in command:
            return subprocess.CompletedProcess(command, 1, "", "bench: cannot write to the folder\n")
        if "--json" in command:
            with open(command[command.index("--json") + 1], "w") as f:
                json.dump({"dir": command[command.index("--dir") + 1]}, f)
            return subprocess.CompletedProcess(command, 0, "ok\n", "")
        assert "--compare" in command
        return subprocess.CompletedProcess(command, 0, "write p50  12.0 ms -> 4.0 ms\n", "")


def test_measure_benchmarks_switches_and_compares_in_one_folder(tmp_path):
    efs, stubber = stubbed_efs()
    bench = FakeBench()
    folder = tmp_path / "results"
    expect_describe(stubber, mode="bursting")  # check there is a change to measure
    expect_describe(stubber, mode="bursting")  # state just before the switch
    expect_update(stubber, {"FileSystemId": FS, "ThroughputMode": "elastic"}, mode="elastic")
    expect_describe(stubber, mode="elastic")
    with stubber:
        code, out = run_main(efs_tool, ["measure", FS, "--dir", str(tmp_path / "efs"), "--mode", "elastic",
                                        "--out", str(folder)], efs=efs, run=bench, sleep=FakeTime().sleep)
    assert code == 0, out
    stubber.assert_no_pending_responses()
    tool = [sys.executable, "-m", "loadtest.efs_bench"]
    assert [c for c, _ in bench.commands] == [
        tool + ["--dir", str(tmp_path / "efs"), "--json", str(folder / "before.json")],
        tool + ["--dir", str(tmp_path / "efs"), "--json", str(folder / "after.json")],
        tool + ["--compare", str(folder / "before.json"), str(folder / "after.json")],
    ]
    assert all(kwargs["cwd"] == efs_tool.ROOT for _, kwargs in bench.commands)
    assert (folder / "compare.txt").read_text() == "write p50  12.0 ms -> 4.0 ms\n"
    assert "write p50  12.0 ms -> 4.0 ms" in out
    steps = json.loads((folder / "steps.json").read_text())["steps"]
    assert [s["step"] for s in steps] == ["state-before", "bench-before", "set", "bench-after", "compare"]
    assert all(s["ok"] and s["started"] <= s["ended"] for s in steps)
    assert steps[2]["request"] == {"FileSystemId": FS, "ThroughputMode": "elastic"}
    assert steps[2]["mode_before"] == "bursting" and steps[2]["mode_after"] == "elastic"


def test_measure_stops_when_the_first_benchmark_fails(tmp_path, capsys):
    efs, stubber = stubbed_efs()
    folder = tmp_path / "results"
    expect_describe(stubber, mode="bursting")
    with stubber:
        code = efs_tool.main(["measure", FS, "--dir", str(tmp_path), "--mode", "elastic", "--out", str(folder)],
                             efs=efs, run=FakeBench(fail_on=str(folder / "before.json")), out=io.StringIO())
    assert code == 1
    stubber.assert_no_pending_responses()  # and no update was sent
    assert "cannot write to the folder" in capsys.readouterr().err
    steps = json.loads((folder / "steps.json").read_text())["steps"]
    assert steps[-1]["step"] == "bench-before" and steps[-1]["ok"] is False
    assert "cannot write" in (folder / "bench-before.log").read_text()


def test_measure_refuses_when_there_is_nothing_to_change(tmp_path):
    efs, stubber = stubbed_efs()
    bench = FakeBench()
    expect_describe(stubber, mode="elastic")
    with stubber:
        code, _ = run_main(efs_tool, ["measure", FS, "--dir", str(tmp_path), "--mode", "elastic",
                                      "--out", str(tmp_path / "r")], efs=efs, run=bench)
    assert code == 1 and bench.commands == []


# --- set_process_mode (moto ECS) -----------------------------------------------

SECRET_ARN = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:pyclassroom-cookie-AbCdEf"


def register_original(ecs, family="pyclassroom-server", containers=None):
    return ecs.register_task_definition(
        family=family,
        requiresCompatibilities=["EC2"],
        networkMode="awsvpc",
        cpu="1024",
        memory="2048",
        executionRoleArn="arn:aws:iam::123456789012:role/pyclassroom-execution",
        taskRoleArn="arn:aws:iam::123456789012:role/pyclassroom-task",
        containerDefinitions=containers or [
            {"name": "log-router", "image": "fluent-bit:2", "essential": False,
             "environment": [{"name": "TORNADO_PROCESSES", "value": "9"}]},
            {"name": "server", "image": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/pyclassroom:1.0",
             "essential": True, "portMappings": [{"containerPort": 8888, "protocol": "tcp"}],
             "environment": [{"name": "STORAGE_ROOT", "value": "/mnt/efs"},
                             {"name": "TORNADO_PROCESSES", "value": "1"},
                             {"name": "TRUST_PROXY", "value": "1"},
                             {"name": "DATA_DIR", "value": "/tmp/pyclassroom"}],
             "secrets": [{"name": "COOKIE_SECRET", "valueFrom": SECRET_ARN}],
             "mountPoints": [{"sourceVolume": "files", "containerPath": "/mnt/efs", "readOnly": False}],
             "stopTimeout": 20,
             "healthCheck": {"command": ["CMD", "python", "-c", "print(1)"], "interval": 10, "timeout": 5,
                             "retries": 3},
             "logConfiguration": {"logDriver": "awslogs", "options": {"awslogs-group": "/ecs/pyclassroom"}}},
        ],
        volumes=[{"name": "files", "efsVolumeConfiguration": {
            "fileSystemId": "fs-12345678", "transitEncryption": "ENABLED",
            "authorizationConfig": {"accessPointId": "fsap-0123456789abcdef0", "iam": "ENABLED"}}}],
        tags=[{"key": "app", "value": "pyclassroom"}],
    )["taskDefinition"]["taskDefinitionArn"]


@pytest.fixture
def ecs(monkeypatch):
    # moto reports this many running tasks for every service: a stable one.
    monkeypatch.setenv("MOTO_ECS_SERVICE_RUNNING", "2")
    with mock_aws():
        client = boto3.client("ecs", region_name=REGION)
        client.create_cluster(clusterName="classes")
        original = register_original(client)
        client.create_service(cluster="classes", serviceName="pyclassroom", taskDefinition=original,
                              desiredCount=2)
        client.original = original
        yield client


def service_task_definition(ecs):
    return ecs.describe_services(cluster="classes", services=["pyclassroom"])["services"][0]["taskDefinition"]


def comparable(ecs, arn):
    answer = ecs.describe_task_definition(taskDefinition=arn, include=["TAGS"])
    td = {k: v for k, v in answer["taskDefinition"].items() if k not in ecs_tool.READ_ONLY_FIELDS}
    td["tags"] = answer.get("tags")
    return td


def set_env(td, container, name, value):
    for c in td["containerDefinitions"]:
        if c["name"] == container:
            for item in c["environment"]:
                if item["name"] == name:
                    item["value"] = value
    return td


def test_new_revision_differs_only_in_tornado_processes(ecs):
    code, out = run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--processes", "4"],
                         ecs=ecs, sleep=FakeTime().sleep)
    assert code == 0, out
    new = service_task_definition(ecs)
    assert new.endswith("/pyclassroom-server:2")
    assert f"old: {ecs.original}" in out and f"new: {new}" in out
    assert comparable(ecs, new) == set_env(comparable(ecs, ecs.original), "server", "TORNADO_PROCESSES", "4")
    # the other container's variable of the same name is left alone
    sidecar = comparable(ecs, new)["containerDefinitions"][0]
    assert sidecar["environment"] == [{"name": "TORNADO_PROCESSES", "value": "9"}]


def test_cpu_and_memory_change_too_when_asked(ecs):
    code, out = run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--processes", "2",
                                    "--cpu", "2048", "--memory", "4096"], ecs=ecs, sleep=FakeTime().sleep)
    assert code == 0, out
    expected = set_env(comparable(ecs, ecs.original), "server", "TORNADO_PROCESSES", "2")
    expected.update(cpu="2048", memory="4096")
    assert comparable(ecs, service_task_definition(ecs)) == expected
    assert "task cpu: 1024 -> 2048" in out and "task memory: 2048 -> 4096" in out


def test_rollback_returns_to_the_previous_revision(ecs):
    assert run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--processes", "4"],
                    ecs=ecs, sleep=FakeTime().sleep)[0] == 0
    changed = service_task_definition(ecs)
    code, out = run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--rollback"],
                         ecs=ecs, sleep=FakeTime().sleep)
    assert code == 0, out
    assert service_task_definition(ecs) == ecs.original
    assert f"old: {changed}" in out and f"new: {ecs.original}" in out
    assert "TORNADO_PROCESSES: 4 -> 1" in out


def test_rollback_skips_inactive_revisions_and_accepts_an_explicit_target(ecs):
    for processes in ("2", "3"):
        assert run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--processes", processes],
                        ecs=ecs, sleep=FakeTime().sleep)[0] == 0
    revision_2 = ecs.original.replace(":1", ":2")
    ecs.deregister_task_definition(taskDefinition=revision_2)
    assert run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--rollback"],
                    ecs=ecs, sleep=FakeTime().sleep)[0] == 0
    assert service_task_definition(ecs) == ecs.original  # :3 -> :1, past the INACTIVE :2
    code, _ = run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--rollback",
                                  "--to", "pyclassroom-server:3"], ecs=ecs, sleep=FakeTime().sleep)
    assert code == 0 and service_task_definition(ecs).endswith(":3")
    code, _ = run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--rollback",
                                  "--to", revision_2], ecs=ecs, sleep=FakeTime().sleep)
    assert code == 1  # INACTIVE


def test_rollback_without_an_earlier_revision_fails(ecs, capsys):
    code = ecs_tool.main(["--cluster", "classes", "--service", "pyclassroom", "--rollback"], ecs=ecs,
                         out=io.StringIO())
    assert code == 1
    assert "no ACTIVE revision of pyclassroom-server older than 1" in capsys.readouterr().err


def test_dry_run_registers_nothing(ecs):
    before = ecs.list_task_definitions()["taskDefinitionArns"]
    code, out = run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--processes", "4",
                                    "--dry-run"], ecs=ecs)
    assert code == 0, out
    assert ecs.list_task_definitions()["taskDefinitionArns"] == before
    assert service_task_definition(ecs) == ecs.original
    assert "TORNADO_PROCESSES: 1 -> 4" in out and "dry run" in out
    assert run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--processes", "4"],
                    ecs=ecs, sleep=FakeTime().sleep)[0] == 0
    code, out = run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--rollback",
                                    "--dry-run"], ecs=ecs)
    assert code == 0 and service_task_definition(ecs).endswith(":2")
    assert f"would update the service to {ecs.original}" in out


def test_the_same_process_count_registers_nothing(ecs):
    code, out = run_main(ecs_tool, ["--cluster", "classes", "--service", "pyclassroom", "--processes", "1"],
                         ecs=ecs)
    assert code == 0 and "nothing to change" in out
    assert len(ecs.list_task_definitions()["taskDefinitionArns"]) == 1


def test_the_only_container_is_the_server_whatever_its_name(ecs):
    arn = register_original(ecs, family="single", containers=[
        {"name": "app", "image": "pyclassroom:1", "essential": True,
         "environment": [{"name": "PORT", "value": "8888"}]}])
    ecs.create_service(cluster="classes", serviceName="single", taskDefinition=arn, desiredCount=2)
    code, out = run_main(ecs_tool, ["--cluster", "classes", "--service", "single", "--processes", "3"],
                         ecs=ecs, sleep=FakeTime().sleep)
    assert code == 0, out
    new = ecs.describe_services(cluster="classes", services=["single"])["services"][0]["taskDefinition"]
    env = ecs.describe_task_definition(taskDefinition=new)["taskDefinition"]["containerDefinitions"][0]["environment"]
    assert env == [{"name": "PORT", "value": "8888"}, {"name": "TORNADO_PROCESSES", "value": "3"}]


def test_unknown_service_is_an_error(ecs, capsys):
    code = ecs_tool.main(["--cluster", "classes", "--service", "nope", "--processes", "2"], ecs=ecs,
                         out=io.StringIO())
    assert code == 1 and "service nope not found in cluster classes" in capsys.readouterr().err


def test_wait_is_bounded_when_tasks_do_not_start(ecs, monkeypatch):
    monkeypatch.setenv("MOTO_ECS_SERVICE_RUNNING", "0")  # a new service that never gets its tasks
    ecs.create_service(cluster="classes", serviceName="stuck", taskDefinition=ecs.original, desiredCount=2)
    time_ = FakeTime()
    code, out = run_main(ecs_tool, ["--cluster", "classes", "--service", "stuck", "--processes", "2",
                                    "--wait-timeout", "60"], ecs=ecs, sleep=time_.sleep, clock=time_.clock)
    assert code == ecs_tool.EXIT_TIMEOUT
    assert sum(time_.sleeps) == 60
    assert "0 of 2 tasks running" in out


@pytest.mark.parametrize("service, message", [
    ({"rolloutState": "FAILED", "rolloutStateReason": "tasks failed to start"}, "deployment failed: tasks failed"),
    ({"taskDefinition": "arn:aws:ecs:eu-west-1:123456789012:task-definition/f:1"}, "rolled back"),
])
def test_wait_reports_a_failed_or_rolled_back_deployment(service, message):
    client = boto3.client("ecs", region_name=REGION)
    target = "arn:aws:ecs:eu-west-1:123456789012:task-definition/f:2"
    deployment = {"status": "PRIMARY", "taskDefinition": target, "rolloutState": "IN_PROGRESS",
                  "desiredCount": 2, "runningCount": 1}
    deployment.update({k: v for k, v in service.items() if k.startswith("rollout")})
    described = {"serviceName": "s", "status": "ACTIVE", "desiredCount": 2, "runningCount": 1,
                 "taskDefinition": service.get("taskDefinition", target), "deployments": [deployment]}
    with Stubber(client) as stubber:
        stubber.add_response("describe_services", {"services": [described], "failures": []},
                             expected_params={"cluster": "c", "services": ["s"]})
        with pytest.raises(ecs_tool.Failure, match=message):
            ecs_tool.wait_stable(client, "c", "s", target, 60, 10, FakeTime().sleep, FakeTime().clock, print)


@pytest.mark.parametrize("argv", [
    [],
    ["--processes", "300"],
    ["--processes", "-1"],
    ["--rollback", "--processes", "2"],
    ["--processes", "2", "--to", "f:1"],
    ["--processes", "2", "--cpu", "0"],
])
def test_bad_arguments(argv):
    with pytest.raises(SystemExit) as exit_:
        ecs_tool.main(["--cluster", "c", "--service", "s", *argv], ecs=object(), out=io.StringIO())
    assert exit_.value.code == 2


def test_scripts_run_from_the_command_line():
    for script in ("efs_throughput.py", "set_process_mode.py"):
        done = subprocess.run([sys.executable, os.path.join(efs_tool.ROOT, "deploy", script), "--help"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "usage:" in done.stdout


# --- programs_run_on (Stubber: CloudFormation as it answers) -------------------

STACK = "pyclassroom"
STACK_PARAMETERS = ("VpcId", "ServerImage", "ProgramsRunOn", "MinRunners")


def stack_description(status="UPDATE_COMPLETE", on="runners", reason=None):
    described = {"StackName": STACK, "CreationTime": dt.datetime(2026, 1, 1, tzinfo=UTC), "StackStatus": status,
                 "Capabilities": ["CAPABILITY_IAM"],
                 "Parameters": [{"ParameterKey": key, "ParameterValue": on if key == "ProgramsRunOn" else "x"}
                                for key in STACK_PARAMETERS]}
    if reason:
        described["StackStatusReason"] = reason
    return {"Stacks": [described]}


def run_where(argv, stubbed_calls):
    client = boto3.client("cloudformation", region_name=REGION)
    out = io.StringIO()
    with Stubber(client) as stubber:
        for method, response, params in stubbed_calls:
            stubber.add_response(method, response, params)
        code = where_tool.main(argv, cfn=client, sleep=lambda s: None, clock=iter(range(0, 10**6, 10)).__next__,
                               out=out)
        stubber.assert_no_pending_responses()
    return code, out.getvalue()


def test_programs_go_back_into_the_server_with_one_parameter_and_nothing_else():
    update = {"StackName": STACK, "UsePreviousTemplate": True, "Capabilities": ["CAPABILITY_IAM"],
              "Parameters": [{"ParameterKey": "VpcId", "UsePreviousValue": True},
                             {"ParameterKey": "ServerImage", "UsePreviousValue": True},
                             {"ParameterKey": "ProgramsRunOn", "ParameterValue": "server"},
                             {"ParameterKey": "MinRunners", "UsePreviousValue": True}]}
    code, out = run_where(["server", "--stack", STACK], [
        ("describe_stacks", stack_description(), {"StackName": STACK}),
        ("update_stack", {"StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/pyclassroom/1"}, update),
        ("describe_stacks", stack_description("UPDATE_IN_PROGRESS"), {"StackName": STACK}),
        ("describe_stacks", stack_description("UPDATE_COMPLETE", on="server"), {"StackName": STACK})])
    assert code == 0 and "ProgramsRunOn -> server" in out and "run on the server" in out, out


def test_programs_already_where_asked_change_nothing_and_a_dry_run_sends_nothing():
    code, out = run_where(["runners", "--stack", STACK], [
        ("describe_stacks", stack_description(on="runners"), {"StackName": STACK})])
    assert code == 0 and "nothing to do" in out
    code, out = run_where(["server", "--stack", STACK, "--dry-run"], [
        ("describe_stacks", stack_description(on="runners"), {"StackName": STACK})])
    assert code == 0 and '"ParameterValue": "server"' in out


def test_an_update_cloudformation_rolled_back_is_an_error_that_says_where_to_look(capsys):
    code, _ = run_where(["server", "--stack", STACK], [
        ("describe_stacks", stack_description(), {"StackName": STACK}),
        ("update_stack", {"StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/pyclassroom/1"}, None),
        ("describe_stacks", stack_description("UPDATE_ROLLBACK_COMPLETE", reason="Resource failed"),
         {"StackName": STACK})])
    err = capsys.readouterr().err
    assert code == 1 and "UPDATE_ROLLBACK_COMPLETE (Resource failed)" in err and "describe-stack-events" in err


def test_a_stack_without_runners_is_told_to_update_its_template_first(capsys):
    described = stack_description()
    described["Stacks"][0]["Parameters"] = [p for p in described["Stacks"][0]["Parameters"]
                                            if p["ParameterKey"] != "ProgramsRunOn"]
    code, _ = run_where(["server", "--stack", STACK], [("describe_stacks", described, {"StackName": STACK})])
    assert code == 1 and "has no ProgramsRunOn parameter" in capsys.readouterr().err


def test_the_parameter_it_changes_is_the_templates():
    from cfnlint.decode import decode
    template, _ = decode(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "deploy",
                                      "cloudformation.yaml"))
    assert template["Parameters"][where_tool.PARAMETER]["AllowedValues"] == ["runners", "server"]
